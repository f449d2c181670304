"""A training run's resume state, shared by the translation models and the language model.

Outside a stage's outputs, one folder per fingerprint (a hash of every setting and input file the
result depends on): ``<root>/<fingerprint[:16]>/`` holds ``run.json`` (the fingerprint and
``mlflow_run_id``), ``last.ckpt`` and the run's best-model files. A run resumes from its
fingerprint's folder when that holds a readable ``last.ckpt``; other settings use another folder,
so going back to the old settings resumes the old run, even after the new one failed. A finished
run's folder is deleted (its result is the stage's output, in DVC's caches). The stages keep their
runs under ``.cache/resume/<stage>/`` in the repository (untracked)."""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info

from rnnsearch.data.textio import write_json
from rnnsearch.environment import is_main_process
from rnnsearch.training.checkpoints import log, resume_point
from rnnsearch.training.resume import LastCheckpoint, RngState

RUN_FILE, LAST = "run.json", "last.ckpt"
FOLDER_DIGITS = 16      # of the fingerprint, as the folder's name


def fingerprint(settings: Any, files: Sequence[Path]) -> str:
    """sha256 of ``settings`` (as sorted JSON) and of the bytes of every file in ``files``."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for path in files:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Session:
    """The resume folder of the run with fingerprint ``fingerprint`` under ``root``."""

    root: Path
    fingerprint: str

    @property
    def folder(self) -> Path:
        return self.root / self.fingerprint[:FOLDER_DIGITS]

    @property
    def last(self) -> Path:
        """The checkpoint the run resumes from."""
        return self.folder / LAST

    def record(self) -> dict[str, Any]:
        """The run record; {} when missing or unreadable (warned: a fresh start is safe)."""
        path = self.folder / RUN_FILE
        if not path.is_file():
            return {}
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            log.warning("warning: %s: unreadable (%s): training afresh", path, err)
            return {}
        return info if isinstance(info, dict) else {}

    def resumable(self) -> dict[str, Any]:
        """The run record when this run can be resumed (its fingerprint, a readable
        ``last.ckpt``), else {}. Reads only."""
        info = self.record()
        if info.get("fingerprint") != self.fingerprint or not self.last.is_file():
            return {}
        if resume_point(self.last, "training afresh") is None:
            return {}
        rank_zero_info(f"resuming from {self.last}")
        return info

    def start(self, resumed: bool, **info: Any) -> None:
        """Open the folder for a run: a fresh run first removes what an unresumable one left
        (a damaged checkpoint, half-written files); then the run record is written."""
        if not is_main_process():
            return
        if not resumed:
            self.discard()
        self.folder.mkdir(parents=True, exist_ok=True)
        for leftover in self.folder.glob(".*.tmp-*"):    # a write killed half-way
            shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink(missing_ok=True)
        write_json(self.folder / RUN_FILE, {"fingerprint": self.fingerprint, **info})

    def callbacks(self, every_n_steps: int) -> list[pl.Callback]:
        """Callbacks for a killed run to resume to the same weights: RNG states in every checkpoint,
        ``last.ckpt`` every ``every_n_steps`` steps (after that step's validation, if any:
        :mod:`rnnsearch.training.resume`)."""
        return [RngState(), LastCheckpoint(self.last, every_n_steps)]

    def fit(self, trainer: pl.Trainer, task: pl.LightningModule, resume: bool,
            **data: Any) -> None:
        """``trainer.fit(task, **data)``, from ``last.ckpt`` when ``resume``; ``weights_only=True``
        explicitly (no pickle runs, even if TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD flips the default)."""
        trainer.fit(task, **data, weights_only=True,
                    ckpt_path=str(self.last) if resume else None)

    def discard(self) -> None:
        """Delete the folder: the run finished (result in outputs) or diverged (rerun afresh)."""
        if is_main_process():
            shutil.rmtree(self.folder, ignore_errors=True)
