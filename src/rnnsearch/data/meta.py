"""The prepare stage's ``meta.json``: which corpus and languages the prepared text holds."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rnnsearch.data.textio import DataError

REQUIRED_KEYS = ("src_lang", "tgt_lang")


def read_meta(path: str | Path) -> dict[str, Any]:
    """``meta.json`` as a dict; a missing, unreadable or incomplete file names itself and the key."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found (run the prepare stage first)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({err}); rerun the prepare stage") from err
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
