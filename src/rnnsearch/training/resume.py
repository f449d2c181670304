"""Exact resumption: a run killed and restarted from ``last.ckpt`` ends with the same weights.

A resumed run matches an unbroken one only if, at the first training step after the restore,
three things are as they were: the data (the batches still to come in the epoch), the random
number generators (dropout; and torch's ``DataLoader`` draws one number from the global RNG each
time it creates an iterator, unless it has its own ``generator``), and the callbacks' view of the
validations so far (best score, early-stopping patience). This module provides one piece each:

* :class:`ResumableLoader`: a ``DataLoader`` whose position in the epoch travels in the checkpoint
  (Lightning saves it with the loops and restores it before iterating).
* :class:`RngState`: the global RNG states (torch, CUDA, numpy, random) saved in the checkpoint and
  put back just before the first step the restored run takes, after Lightning's set-up draws.
* :class:`LastCheckpoint`: writes ``last.ckpt`` where a run can continue from: after the
  validation of that step (when there is one), not before it, and stops a restored run that
  early stopping had stopped.

Everything is stored as tensors, lists, dicts, numbers and strings, so the checkpoint loads with
``weights_only=True`` (:mod:`rnnsearch.training.checkpoints`), as both stages read it.
"""
from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint, EarlyStopping
from pytorch_lightning.trainer.states import TrainerFn
from torch.utils.data import DataLoader, Sampler


# ---- random number generators ------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    """The global RNG states as weights-only-loadable values (tensors, lists, numbers)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),                                   # uint8 [5056]
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(keys.astype(np.int64)),  # [624]
                  "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()                    # one uint8 tensor a device
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Put back what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["cached"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RngState(pl.Callback):
    """Saves the global RNG states in every checkpoint; a restored run continues their sequence.

    The states are put back at the first ``on_train_epoch_start`` or ``on_train_batch_start``
    after the restore, whichever comes first: that is where the unbroken run was when the file
    was written (after a step or its validation, nothing draws until the next epoch starts or
    the next batch trains), and it is after the draws Lightning makes while setting the restored
    run up (each new ``DataLoader`` iterator takes one number from torch's RNG).

    With several processes the file holds rank 0's states; every rank is seeded alike and draws
    alike, so they are every rank's.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None   # loaded, not yet put back

    def state_dict(self) -> dict[str, Any]:
        return rng_state()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def _restore(self) -> None:
        if self._pending is not None:
            set_rng_state(self._pending)
            self._pending = None

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore()

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        self._restore()


# ---- data --------------------------------------------------------------------------------------

class _SkipFirst(Sampler[list[int]]):
    """A batch sampler that leaves out the first ``skip`` batches of ``batches``' next pass.

    ``sampler`` is the wrapped batch sampler: at the start of every epoch Lightning calls
    ``dataloader.batch_sampler.sampler.set_epoch(epoch)`` (the restored epoch on resume), which
    is how a shuffling batch sampler learns the epoch to shuffle for.
    """

    def __init__(self, batches: Sampler[list[int]]) -> None:
        self.batches, self.skip = batches, 0
        self.sampler = batches

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[list[int]]:
        # the wrapped sampler's iterator is made now, as it was without this wrapper; the skipped
        # batches are passed over at the first next() without reading their data
        return itertools.islice(iter(self.batches), self.skip, None)


class _Counted(Iterator[Any]):
    """A ``DataLoader`` iterator that counts the batches it hands out into ``loader.served``."""

    def __init__(self, inner: Iterator[Any], loader: "ResumableLoader") -> None:
        self.inner, self.loader = inner, loader

    def __next__(self) -> Any:
        batch = next(self.inner)
        self.loader.served += 1
        return batch

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]


class ResumableLoader(DataLoader):
    """A ``DataLoader`` over a batch sampler that a restored run continues mid-epoch.

    Lightning calls ``state_dict()`` when it writes a checkpoint (the batches this pass has handed
    out, which with a sized loader are the batches of the epoch trained so far) and, on resume,
    ``load_state_dict()`` before it creates the iterator: that pass then starts with the first
    batch the killed run had not trained on; later passes are whole. ``iter()`` creates the torch
    iterator at once, as a plain ``DataLoader`` does, so its draw from the global RNG comes at the
    same point as before: an unbroken run is unchanged.
    """

    def __init__(self, dataset: Sequence[Any], batch_sampler: Sampler[list[int]],
                 **kwargs: Any) -> None:
        if isinstance(batch_sampler, _SkipFirst):    # Lightning re-instantiating the loader
            batch_sampler = batch_sampler.batches
        self._skipper = _SkipFirst(batch_sampler)
        super().__init__(dataset, batch_sampler=self._skipper, **kwargs)
        self._resume_at = 0   # batches the next pass leaves out (set by load_state_dict)
        self.served = 0       # batches of the current pass handed out, skipped ones included

    def __iter__(self) -> Iterator[Any]:   # type: ignore[override]
        # the skip is set for this pass only; worker iterators may call iter(sampler) twice
        self._skipper.skip, self._resume_at = self._resume_at, 0
        self.served = self._skipper.skip
        return _Counted(super().__iter__(), self)

    def state_dict(self) -> dict[str, int]:
        return {"batches": self.served}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self._resume_at = int(state_dict["batches"])


# ---- checkpoints -------------------------------------------------------------------------------

class LastCheckpoint(Checkpoint):
    """Write ``path`` every ``every_n_steps`` training steps, where a restored run can continue.

    Lightning's ``ModelCheckpoint(every_n_train_steps=...)`` writes at the end of the training
    batch, before the validation of that same step: the file then lacks that validation's effect
    on the callbacks (best score, ``model.pt``, early-stopping patience), and a run restored from
    it does not redo it (Lightning fast-forwards a validation it finds due on restart). So at a
    step followed by a validation this callback writes at the validation's end instead; being a
    ``Checkpoint`` it runs after the other callbacks, which have then taken the validation into
    account. Lightning restores such a file without repeating the validation. At other steps the
    file is written at the end of the batch.

    ``Trainer.should_stop`` is not in the file: a run restored from the validation at which
    ``EarlyStopping`` ran out of patience is stopped at once, as the killed run was.
    """

    def __init__(self, path: str | Path, every_n_steps: int) -> None:
        self.path, self.every_n_steps = Path(path), every_n_steps
        self._restored = False

    def _due(self, trainer: pl.Trainer) -> bool:
        return (trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
                and trainer.global_step > 0 and trainer.global_step % self.every_n_steps == 0)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        loop = trainer.fit_loop.epoch_loop
        # the test Lightning makes right after this hook (Timer and EarlyStopping, which run
        # before a Checkpoint, may have asked to stop: Lightning then validates too)
        validates = loop._should_check_val_fx(trainer.fit_loop._data_fetcher)
        if self._due(trainer) and not validates:
            trainer.save_checkpoint(self.path)   # the full resume state (not weights only)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._due(trainer):
            trainer.save_checkpoint(self.path)   # the full resume state (not weights only)

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        self._restored = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Early stopping decided at the validation the file was written after: the killed run
        # was about to stop, so the restored one stops too (should_stop is not in the file).
        if self._restored and any(isinstance(cb, EarlyStopping) and cb.wait_count >= cb.patience
                                  for cb in trainer.callbacks):
            trainer.should_stop = True
        self._restored = False
