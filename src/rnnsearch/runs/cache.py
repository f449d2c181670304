"""An experiment's trained files, taken from this clone's DVC cache without touching the
workspace: :func:`fetch` copies one cell's ``model.pt``, ``data/tokenized`` and the branch's
``params.yaml`` to ``.cache/experiments/<name>/`` (``python -m rnnsearch.presets translate``)."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rnnsearch.errors import DataError

FOLDER = Path(".cache") / "experiments"
TOKENIZED = "data/tokenized"


def model_path(cell: str) -> str:
    """Where the train stage writes ``cell``'s model."""
    return f"data/models/{cell}/model.pt"


def lock_outputs(lock: dict[str, Any]) -> dict[str, str]:
    """Every output of a ``dvc.lock`` and its md5 (``<md5>.dir`` for a folder)."""
    return {out["path"]: out["md5"] for stage in lock.get("stages", {}).values()
            for out in stage.get("outs", []) if "md5" in out}


def fetch(root: Path, lock: dict[str, Any], params: str, cell: str, show: str) -> Path:
    """Copy ``cell``'s model and the vocabularies named in ``lock`` (a ``dvc.lock``) from
    ``root``'s DVC cache, and the params text ``params``, into ``root/.cache/experiments/<show>/``;
    returns that folder. An output missing from the lock or the cache is refused naming it."""
    from dvc.repo import Repo

    outputs = lock_outputs(lock)
    wanted = [model_path(cell), TOKENIZED]
    for path in wanted:
        if path not in outputs:
            raise DataError(f"{show}: its dvc.lock has no output {path}: run it again")
    folder = root / FOLDER / show
    with Repo(str(root)) as repo:
        cache = Cache(repo.cache.local.oid_to_path)
        for path in wanted:
            cache.materialise(outputs[path], folder / path, f"{show}'s {path}")
    (folder / "params.yaml").write_text(params, encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Cache:
    """A DVC cache, by the function that names the file of an object id (md5)."""

    oid_to_path: Callable[[str], str]

    def materialise(self, md5: str, target: Path, what: str) -> None:
        """Copy the object ``md5`` (a file, or a folder's ``.dir`` listing) to ``target``."""
        if md5.endswith(".dir"):
            listing = json.loads(self.file(md5, what).read_text(encoding="utf-8"))
            for entry in listing:
                copy(self.file(entry["md5"], what), target / entry["relpath"])
        else:
            copy(self.file(md5, what), target)

    def file(self, md5: str, what: str) -> Path:
        """The cache file of ``md5`` (``files/md5/<2>/<rest>``); refused when it is missing."""
        path = Path(self.oid_to_path(md5))
        if not path.is_file():
            raise DataError(f"{what} is not in this clone's DVC cache ({path} is missing): run "
                            f"the experiment in this clone first")
        return path


def copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target``, creating its folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
