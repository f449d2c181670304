"""Params as nested mappings: one merged over another, and flattened to dotted keys."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in recursively (lists and scalars replace)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: every value that is neither a mapping nor a
    dataclass, under its dotted key (``prefix`` first), in the tree's order."""
    if dataclasses.is_dataclass(tree):
        tree = dataclasses.asdict(tree)
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) or dataclasses.is_dataclass(value):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat
