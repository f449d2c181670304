"""The repository's params files: where the repository is, and its presets.

A preset (``presets/<name>.yaml``) holds only the keys it changes, merged over params.yaml;
:mod:`rnnsearch.presets` runs them, the bench and the studies only read them."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from rnnsearch.config.base import read_params
from rnnsearch.errors import ConfigError

_EXPS_TMP = os.sep + os.path.join(".dvc", "tmp", "exps") + os.sep
_NAME = re.compile(r"[A-Za-z0-9_-]+")     # a preset's name


def repo_root(start: str | Path | None = None) -> Path:
    """The repository root: ``RNNSEARCH_ROOT``, else the first parent holding ``dvc.yaml``
    (a DVC experiment's ``<root>/.dvc/tmp/exps/<tmp>/`` maps back to ``<root>``)."""
    if os.environ.get("RNNSEARCH_ROOT"):
        return Path(os.environ["RNNSEARCH_ROOT"]).resolve()
    here = Path(start or os.getcwd()).resolve()
    text = str(here)
    if _EXPS_TMP in text:
        return Path(text.split(_EXPS_TMP)[0])
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").is_file() or (candidate / ".git").exists():
            return candidate
    return here


def check_name(name: str) -> str:
    """``name`` if plain (letters, digits, _ and -), else a :class:`ConfigError`: it makes a file
    path, a git branch and a report folder, and ``../params`` would read params.yaml as a preset."""
    if not _NAME.fullmatch(name):
        raise ConfigError(f"preset name '{name}': use letters, digits, _ and - only (the file "
                          f"presets/<name>.yaml, named without .yaml)")
    return name


def preset_path(name: str) -> Path:
    """``presets/<name>.yaml`` at the repository root (``name`` checked by :func:`check_name`)."""
    return repo_root() / "presets" / f"{check_name(name)}.yaml"


def load_preset(name: str) -> dict[str, Any]:
    """The overrides of preset ``name``; a missing preset lists the ones there are."""
    path = preset_path(name)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"{path}: no preset '{name}' (known: {', '.join(known)})")
    return read_params(path)
