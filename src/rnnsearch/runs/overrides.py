"""Params as DVC's ``-S`` overrides (Hydra's syntax), as ``dvc exp run`` takes them and as the
experiments' tables and exported reports show what a run changed."""
from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")  # strings that need no quoting in an override


def hydra_value(value: Any, in_list: bool = False) -> str:
    """``value`` in DVC's (Hydra's) override syntax: null, true/false, numbers, strings (plain
    when they can be, else quoted; always quoted inside a list), ``[...]`` and ``{key:...}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if _PLAIN.fullmatch(value) and not in_list else json.dumps(value)
    if isinstance(value, list):
        return f"[{','.join(hydra_value(v, in_list=True) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def override_argument(key: str, value: Any) -> str:
    """One ``dvc exp run -S`` override in DVC's (Hydra's) syntax."""
    return f"{key}={hydra_value(value)}"
