"""The benchmark's workload: real Multi30k de->en batches and the reference models.

The data goes through the pipeline's own prepare and tokenize stages once and is cached under
``.cache/bench/`` (about 20 s the first time). Training steps are the train stage's
(:mod:`rnnsearch.training.harness`). Vocabularies are the 8,000 most frequent words
per side, as in the reference configuration.
"""
from __future__ import annotations

import random
import statistics
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import yaml

from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.models.seq2seq import build_model
from rnnsearch.stage_command import run_stage_command
from rnnsearch.training import harness
from rnnsearch.training.data import Batch, Pair, bucket_batches, collate, read_pairs
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.precision import mixed_autocast

VOCAB = 8000
REFERENCE_OPTIM = OptimConfig(optimizer="adam", lr=1e-3, clip_norm=1.0)   # the reference's
FUSED_OPTIM = replace(REFERENCE_OPTIM, fused=True)   # the reference with train.optim.fused


def reference_config(model: str, hidden: int = 256) -> ModelConfig:
    """The issue's reference configuration (embedding = hidden = attention = output width)."""
    overrides = {"model": model, "embedding_size": hidden, "hidden_size": hidden,
                 "attention_size": hidden, "output_size": hidden}
    if model == "encdec":
        overrides["bidirectional"] = False
    if model == "luong":
        overrides.update(score="general", cell="gru")
    return ModelConfig(**overrides)


def tokenized_multi30k(cache: Path, mirror: str | None) -> Path:
    """``cache/multi30k-de-en`` with tokenised splits and 8k vocabularies, made once by the
    pipeline's own prepare and tokenize stages (their scripts, with params of the bench's)."""
    out = cache / "multi30k-de-en"
    if (out / "vocab.tgt.txt").is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    params = cache / "params.yaml"
    params.write_text(yaml.safe_dump({
        "prepare": {"corpus": "multi30k", "src_lang": "de", "tgt_lang": "en",
                    "mirror": str(Path(mirror).resolve()) if mirror else None,
                    "cache_dir": str((cache / "corpora").resolve()),
                    "sizes": {"train": 0, "dev": 0, "test": 0}},
        "tokenize": {"vocab_size_src": VOCAB, "vocab_size_tgt": VOCAB}}), encoding="utf-8")
    store, metrics = cache / "mlflow.db", cache / "metrics"
    run_stage_command("prepare.py", params, store, "--out", str(cache / "prepared"),
                      "--metrics", str(metrics / "prepare.json"), label="bench")
    run_stage_command("tokenize_text.py", params, store, "--prepared", str(cache / "prepared"),
                      "--out", str(out), "--metrics", str(metrics / "tokenize.json"),
                      "--plot", str(metrics / "lengths.csv"), label="bench")
    return out


@dataclass
class Workload:
    """Encoded training pairs, dev pairs and bucketed training batches."""

    train: list[Pair]
    test: list[Pair]
    batches: list[list[int]]
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    batch_size: int = 64           # sentences in a full batch

    def batch(self, index: int) -> Batch:
        return collate([self.train[i] for i in self.batches[index % len(self.batches)]])

    def padding_fraction(self, count: int) -> float:
        """Padding share of the tokens (source + target) of the first ``count`` batches."""
        real = padded = 0
        for index in range(count):
            batch = self.batch(index)
            real += int(batch.src_len.sum()) + batch.target_tokens
            padded += batch.src.numel() + batch.tgt_out.numel()
        return 1 - real / padded


def load_workload(data: Path, batch_size: int = 64, max_len: int = 50, seed: int = 0,
                  limit: int = 0) -> Workload:
    """Encode the cached Multi30k splits and cut the training set into bucketed batches.

    ``limit`` > 0 keeps only that many training pairs and a tenth as many test sentences (for
    the smoke test).
    """
    src_vocab = Vocabulary.load(data / "vocab.src.txt")
    tgt_vocab = Vocabulary.load(data / "vocab.tgt.txt")
    train, _ = read_pairs(data, "train", src_vocab, tgt_vocab, max_len)
    test, _ = read_pairs(data, "test", src_vocab, tgt_vocab)
    if limit:
        train, test = train[:limit], test[: max(1, limit // 10)]
    lengths = [(len(s), len(t)) for s, t in train]
    batches = bucket_batches(lengths, batch_size, 0.1, random.Random(seed))
    return Workload(train, test, batches, src_vocab, tgt_vocab, batch_size)


@dataclass
class TrainingSpeed:
    tokens_per_second: float      # median over the timed windows
    windows: list[float]
    steps: int
    model: torch.nn.Module


def new_training(config: ModelConfig, work: Workload, seed: int = 0,
                 optim: OptimConfig = REFERENCE_OPTIM, bf16_cross_entropy: bool = False,
                 fused_loss: bool = False) -> tuple[TranslationTask, torch.optim.Optimizer]:
    """A freshly initialised model of ``config`` for ``work``'s vocabularies (seeded), in train
    mode, in the train stage's task with the reference optimiser (:data:`REFERENCE_OPTIM`, or
    ``optim``), ``train.trainer.bf16_cross_entropy`` and ``train.trainer.fused_loss``."""
    torch.manual_seed(seed)
    model = build_model(config, len(work.src_vocab), len(work.tgt_vocab)).train()
    task = TranslationTask(model, optim, bf16_cross_entropy=bf16_cross_entropy,
                           fused_loss=fused_loss)
    return task, task.configure_optimizers()


def measure_training(config: ModelConfig, work: Workload, windows: int = 5, window_steps: int = 20,
                     warmup: int = 5, seed: int = 0, optim: OptimConfig = REFERENCE_OPTIM
                     ) -> TrainingSpeed:
    """Train ``config`` on real batches (:func:`train_step`) with ``optim``; target tokens/s
    per window of steps."""
    task, optimizer = new_training(config, work, seed, optim)
    rates, step = [], 0
    for window in range(-1, windows):
        steps = warmup if window < 0 else window_steps
        tokens, start = 0, time.perf_counter()
        for _ in range(steps):
            tokens += train_step(task, optimizer, work.batch(step))
            step += 1
        if window >= 0:
            rates.append(tokens / (time.perf_counter() - start))
    return TrainingSpeed(statistics.median(rates), rates, step, task.model.eval())


@dataclass(frozen=True)
class Variant:
    """One way of training the reference model, for :func:`measure_side_by_side`."""

    optim: OptimConfig = REFERENCE_OPTIM
    bf16: bool = False          # under torch.autocast("cpu", torch.bfloat16)
    bf16_cross_entropy: bool = False   # train.trainer.bf16_cross_entropy (with bf16)
    fused_loss: bool = False           # train.trainer.fused_loss

    def autocast(self) -> torch.autocast:
        """The CPU autocast the variant trains under (off unless ``bf16``), as the train stage's
        ``bf16-mixed`` runs it (:mod:`rnnsearch.training.precision`): each weight cast once per
        step's forward."""
        return mixed_autocast("cpu", "bf16-mixed", enabled=self.bf16)

    def new_training(self, config: ModelConfig, work: Workload
                     ) -> tuple[TranslationTask, torch.optim.Optimizer]:
        """:func:`new_training` of ``config`` with the variant's optimiser and loss."""
        return new_training(config, work, 0, self.optim, self.bf16_cross_entropy,
                            self.fused_loss)

    def step(self, task: TranslationTask, optimizer: torch.optim.Optimizer, batch: Batch) -> int:
        """One :func:`train_step`, its forward under the variant's autocast as the train
        stage's Trainer runs it; returns the batch's target tokens."""
        return train_step(task, optimizer, batch, self.autocast())


def measure_side_by_side(config: ModelConfig, work: Workload, variants: dict[str, Variant],
                         rounds: int, window_steps: int) -> dict[str, Any]:
    """Train one model per variant, the variants taking turns window by window (A, B, C, A, B,
    C, ...) on the same batches, so that a machine whose speed drifts during the measurement
    slows every variant alike. Per variant: the median target tokens/s of its windows and
    ``speedup``, the median over rounds of its rate divided by the first variant's in the same
    round.

    Every variant first trains once, untimed, on the ``rounds x window_steps`` batches its
    windows then take again: a training run meets each batch shape hundreds of times, and the
    first time costs extra (oneDNN builds its bf16 kernels per matrix shape, 15-20 ms each on
    the Intel Xeon with AMX), which timed windows of unseen shapes would charge to bf16."""
    runs = {name: (variant, *variant.new_training(config, work))
            for name, variant in variants.items()}
    steps = dict.fromkeys(variants, 0)

    def window(name: str, count: int) -> float:
        variant, task, optimizer = runs[name]
        tokens, start = 0, time.perf_counter()
        for _ in range(count):
            tokens += variant.step(task, optimizer, work.batch(steps[name]))
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


def train_step(task: TranslationTask, optimizer: torch.optim.Optimizer, batch: Batch,
               forward_context: AbstractContextManager | None = None) -> int:
    """One training step of the train stage's (:func:`rnnsearch.training.harness.train_step`,
    its forward in ``forward_context``); returns the batch's target tokens."""
    harness.train_step(task, optimizer, batch, forward_context)
    return batch.target_tokens
