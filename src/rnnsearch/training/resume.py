"""Exact resumption: a run killed and restarted from ``last.ckpt`` ends with the same weights.

That needs the same batches still to come (:class:`ResumableLoader`), the same RNG states
(:class:`RngState`; each new ``DataLoader`` iterator draws from torch's) and the callbacks' view of
the validations so far (:class:`LastCheckpoint`), all stored as plain values and tensors, so the
checkpoint loads with ``weights_only=True``."""
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
        state["cuda"] = torch.cuda.get_rng_state_all()              # one uint8 tensor a device
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
    """Saves the global RNG states in every checkpoint and puts them back at a restored run's first
    epoch or batch start (where the unbroken run was, after Lightning's set-up draws). Rank 0's
    states serve every rank (all are seeded and draw alike)."""

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
    """A batch sampler leaving out the first ``skip`` batches of ``batches``' next pass;
    ``sampler`` is the wrapped one, for Lightning's ``batch_sampler.sampler.set_epoch``."""

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
    """A ``DataLoader`` over a batch sampler that a restored run continues mid-epoch: its state is
    the batches this pass handed out, which the restored next pass skips. The torch iterator is
    still made at ``iter()``, so its RNG draw comes where it always did."""

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
    Unlike ``ModelCheckpoint(every_n_train_steps=...)``, a step followed by a validation is written
    after it (and after the other callbacks saw it): Lightning does not redo it on restart. A run
    restored where ``EarlyStopping`` ran out of patience stops."""

    def __init__(self, path: str | Path, every_n_steps: int) -> None:
        self.path, self.every_n_steps = Path(path), every_n_steps
        self._restored = False

    def _due(self, trainer: pl.Trainer) -> bool:
        return (trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
                and trainer.global_step > 0 and trainer.global_step % self.every_n_steps == 0)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        loop = trainer.fit_loop.epoch_loop
        # Lightning's test right after this hook (Timer and EarlyStopping run before a
        # Checkpoint and may have asked to stop: Lightning then validates too)
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
