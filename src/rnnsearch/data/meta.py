"""The prepare stage's ``meta.json``: which corpus and languages the prepared text holds."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnsearch.data.textio import read_json
from rnnsearch.errors import DataError

REQUIRED_KEYS = ("src_lang", "tgt_lang")


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` dict; a missing, unreadable or incomplete file names itself and the key."""
    path = Path(path)
    meta = read_json(path)
    if not isinstance(meta, dict):
        raise DataError(f"{path}: expected a JSON object; rerun the prepare stage")
    for key in REQUIRED_KEYS:
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise DataError(f"{path}: missing key '{key}' (a language code); rerun the prepare "
                            f"stage")
    return meta


def read_languages(path: str | Path) -> dict[str, str]:
    """``{"src": lang, "tgt": lang}`` from the prepare stage's ``meta.json`` at ``path``."""
    meta = read_meta(path)
    return {"src": meta["src_lang"], "tgt": meta["tgt_lang"]}
