"""Training speed: :func:`train_speed` (the train stage's Trainer, no checkpoints or MLflow);
:func:`new_training`, the stage's task and optimiser for hand-taken steps (arithmetic, profiles)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar

from rnnsearch.bench.data import MAX_LEN
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.bench.device import failure, peak_memory_mib, release, reset_peak_memory, synchronize
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training import harness
from rnnsearch.training.data import TranslationDataModule
from rnnsearch.training.module import TranslationTask


class StepTimer(pl.Callback):
    """Wall-clock seconds and target tokens of the steps after ``warmup``, less ``excluded()``
    (a running total: graph captures)."""

    def __init__(self, warmup: int, device: str, excluded: Callable[[], float]) -> None:
        self.warmup, self.device, self.excluded = warmup, device, excluded
        self.start = self.seconds = self.excluded_before = 0.0
        self.steps = self.tokens_before = self.tokens = 0

    @staticmethod
    def _tokens(module: pl.LightningModule) -> int:   # the task's count, taken on the host
        return int(getattr(module, "_tokens_seen"))

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if trainer.global_step == self.warmup and not self.start:
            synchronize(self.device)
            self.start, self.tokens_before = time.perf_counter(), self._tokens(module)
            self.excluded_before = self.excluded()

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self.start and trainer.global_step == trainer.max_steps:
            synchronize(self.device)
            self.seconds = (time.perf_counter() - self.start
                            - (self.excluded() - self.excluded_before))
            self.steps = trainer.global_step - self.warmup
            self.tokens = self._tokens(module) - self.tokens_before


def train_speed(model: Any, data_dir: Path, device: str, batch: int, precision: str,
                warmup: int, steps: int, work_dir: Path, graphs: bool = False) -> dict[str, Any]:
    """One Lightning run of ``warmup + steps`` steps: tokens/s and peak memory, or the error; with
    ``graphs``, capture time apart. Frees it all: graphs kept alive leave later runs no memory."""
    reset_peak_memory(device)
    row = _timed_training(model, data_dir, device, batch, precision, warmup, steps, work_dir,
                          graphs)
    row["peak_memory_mib"] = peak_memory_mib(device)
    release(device)
    return row


def _timed_training(model: Any, data_dir: Path, device: str, batch: int, precision: str,
                    warmup: int, steps: int, work_dir: Path, graphs: bool) -> dict[str, Any]:
    # "32-true@highest": a precision with train.trainer.matmul_precision (fp32 beside TF32)
    lightning, _, matmul = precision.partition("@")
    config = harness.device_config(model.train, device, lightning, batch, warmup + steps,
                                   cuda_graphs=graphs, matmul_precision=matmul or "auto")
    row: dict[str, Any] = {"model": model.name, "batch": batch, "precision": lightning,
                           "cuda_graphs": graphs}
    pl.seed_everything(config.seed, verbose=False)
    data = TranslationDataModule(data_dir, MAX_LEN, batch, config.data.max_padding, 0,
                                 config.seed)
    task, runner = harness.bare_task(config, build_model(model.config, model.vocab, model.vocab))
    timer = StepTimer(warmup, device, (lambda: runner.capture_seconds) if runner else float)
    deterministic, matmul_before = (torch.are_deterministic_algorithms_enabled(),
                                    torch.get_float32_matmul_precision())
    # the progress bar the stage gets under dvc repro (a log file: refreshed every 50 steps)
    progress = TQDMProgressBar(refresh_rate=max(config.trainer.log_every_steps, 50))
    trainer = harness.bare_trainer(config, work_dir, [timer, progress])
    try:
        trainer.fit(task, datamodule=data)
    except RuntimeError as err:     # out of memory, or a CUDA failure: the next runs still run
        row["error"] = failure(err)
    else:
        row.update(matmul_precision=torch.get_float32_matmul_precision(),
                   tokens_per_s=timer.tokens / timer.seconds if timer.seconds else 0.0,
                   steps=timer.steps, ms_per_step=1e3 * timer.seconds / max(timer.steps, 1))
        if runner:
            row.update(runner.stats())
    finally:   # process-wide flags, which decoding and the next row must not inherit
        torch.use_deterministic_algorithms(deterministic)
        torch.set_float32_matmul_precision(matmul_before)
    if runner:
        runner.release()                   # the graphs' pool, whatever else still refers to it
    return row


def new_training(config: ModelConfig, vocab: int, optim: OptimConfig
                 ) -> tuple[TranslationTask, torch.optim.Optimizer]:
    """A seeded model of ``config`` in train mode in the stage's task, and its optimiser."""
    torch.manual_seed(0)
    task = TranslationTask(build_model(config, vocab, vocab).train(), optim)
    return task, task.configure_optimizers()
