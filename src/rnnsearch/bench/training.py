"""Training speed two ways: :func:`train_speed`, the train stage's Trainer without checkpoints or
MLflow; and :func:`measure_side_by_side`, one model trained several ways (:class:`Variant`)
taking turns window by window, so that a machine whose speed drifts slows them alike."""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar

from rnnsearch.bench.data import MAX_LEN, Batches
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.device import failure, peak_memory_mib, release, reset_peak_memory, synchronize
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training import harness
from rnnsearch.training.data import TranslationDataModule
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.precision import mixed_autocast


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
    """One Lightning run of ``warmup + steps`` steps: tokens/s and peak memory, or the error;
    with ``graphs`` the capture time reported apart. Everything is freed before returning:
    graphs kept past their run left the next runs out of memory."""
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


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of training, as the train stage's settings of these names train."""

    fused_adam: bool = False           # train.optim.fused
    bf16: bool = False                 # train.trainer.precision: bf16-mixed
    bf16_cross_entropy: bool = False   # train.trainer.bf16_cross_entropy (with bf16)
    fused_loss: bool = False           # train.trainer.fused_loss

    @property
    def label(self) -> str:
        """What the report calls it: the settings it turns on."""
        on = [name for name, set_ in (("bf16 autocast", self.bf16), ("loss in bf16",
              self.bf16_cross_entropy), ("fused output layer and loss", self.fused_loss),
              ("fused Adam", self.fused_adam)) if set_]
        return ", ".join(on) or "fp32, Adam's loop (the default run's)"

    def autocast(self) -> torch.autocast:
        """The CPU autocast of the stage's ``bf16-mixed`` (off unless ``bf16``)."""
        return mixed_autocast("cpu", "bf16-mixed", enabled=self.bf16)

    def new_training(self, config: ModelConfig, vocab: int, optim: OptimConfig
                     ) -> tuple[TranslationTask, torch.optim.Optimizer]:
        """A seeded model of ``config`` in train mode in the stage's task, and its optimiser."""
        torch.manual_seed(0)
        task = TranslationTask(build_model(config, vocab, vocab).train(),
                               dataclasses.replace(optim, fused=self.fused_adam),
                               bf16_cross_entropy=self.bf16_cross_entropy,
                               fused_loss=self.fused_loss)
        return task, task.configure_optimizers()

    def step(self, task: TranslationTask, optimizer: torch.optim.Optimizer, batches: Batches,
             index: int) -> int:
        """The stage's step on batch ``index`` under the variant's autocast; its target tokens."""
        batch = batches.batch(index)
        harness.train_step(task, optimizer, batch, self.autocast())
        return batch.target_tokens


# the default model's training beside its variants, the reference (fp32, Adam's loop) first
SIDE_BY_SIDE = {"fp32": Variant(), "bf16_autocast": Variant(bf16=True),
                "bf16_cross_entropy": Variant(bf16=True, bf16_cross_entropy=True),
                "fused_adam": Variant(True), "bf16_fused_adam": Variant(True, True),
                "bf16_cross_entropy_fused_adam": Variant(True, True, True),
                "fused_loss": Variant(fused_loss=True),
                "fused_loss_fused_adam": Variant(True, fused_loss=True),
                "bf16_fused_loss_fused_adam": Variant(True, True, fused_loss=True)}
FASTEST_FP32, FASTEST = "fused_loss_fused_adam", "bf16_cross_entropy_fused_adam"
# without native bf16 instructions autocast emulates bf16 (a step takes ~16x fp32's): left out
WITHOUT_NATIVE_BF16 = ("fp32", "fused_adam", "fused_loss", "fused_loss_fused_adam")


def measure_side_by_side(config: ModelConfig, vocab: int, optim: OptimConfig, batches: Batches,
                         variants: dict[str, Variant], rounds: int, window_steps: int
                         ) -> dict[str, Any]:
    """Per variant: median tokens/s of its windows and ``speedup``, the median over rounds of its
    rate over the first's. Each first trains once, untimed, on the batches its windows take (a
    shape costs extra the first time: oneDNN builds bf16 kernels per shape, 15-20 ms each)."""
    runs = {name: (v, *v.new_training(config, vocab, optim)) for name, v in variants.items()}
    steps = dict.fromkeys(variants, 0)

    def window(name: str, count: int) -> float:
        variant, task, optimizer = runs[name]
        tokens, start = 0, time.perf_counter()
        for _ in range(count):
            tokens += variant.step(task, optimizer, batches, steps[name])
            steps[name] += 1
        return tokens / (time.perf_counter() - start)

    for name in variants:
        window(name, rounds * window_steps)
        steps[name] = 0
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name in variants:
            rates[name].append(window(name, window_steps))
    first = rates[next(iter(variants))]
    return {name: {"tokens_per_s": statistics.median(windows), "windows": windows,
                   "speedup": statistics.median(a / b for a, b in zip(windows, first))}
            for name, windows in rates.items()}


def side_by_side_part(config: ModelConfig, vocab: int, optim: OptimConfig, batches: Batches,
                      bf16_native: bool, rounds: int, window_steps: int) -> dict[str, Any]:
    """The reference beside its variants (without native bf16, beside those without bf16)."""
    variants = {name: v for name, v in SIDE_BY_SIDE.items()
                if bf16_native or name in WITHOUT_NATIVE_BF16}
    return measure_side_by_side(config, vocab, optim, batches, variants, rounds, window_steps)
