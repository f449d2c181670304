"""The benchmark's workload: real Multi30k de->en batches and the reference models.

The data goes through the pipeline's own prepare and tokenize code once and is cached under
``.cache/bench/`` (about 10 s the first time). Vocabularies are the 8,000 most frequent words
per side, as in the reference configuration.
"""
from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from rnnsearch.config.base import from_dict
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.data.textio import atomic_dir, write_json
from rnnsearch.data.vocab import PAD_ID, Vocabulary
from rnnsearch.models import build_model
from rnnsearch.training.data import Batch, Pair, bucket_batches, collate, read_pairs

VOCAB = 8000


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
    """``cache/multi30k-de-en`` with tokenised splits and 8k vocabularies (built once)."""
    # here, not at the top: tokenising needs sacremoses, which the GPU bench (and the GPU
    # machine) does without
    from rnnsearch.stages.prepare import prepare_corpus
    from rnnsearch.stages.tokenize import build_vocabularies, tokenize_splits

    out = cache / "multi30k-de-en"
    if (out / "vocab.tgt.txt").is_file():
        return out
    prepare = from_dict(PrepareConfig, {"corpus": "multi30k", "src_lang": "de", "tgt_lang": "en",
                                        "mirror": mirror, "cache_dir": str(cache / "corpora"),
                                        "sizes": {"train": 0, "dev": 0, "test": 0}}, "bench")
    tokenize = TokenizeConfig(vocab_size_src=VOCAB, vocab_size_tgt=VOCAB)
    with atomic_dir(cache / "prepared") as prepared:
        write_json(prepared / "meta.json", prepare_corpus(prepare, prepared))
    with atomic_dir(out) as tmp:
        tokens = tokenize_splits(tokenize, cache / "prepared", tmp)
        build_vocabularies(tokenize, tokens["train"], tmp)
    return out


@dataclass
class Workload:
    """Encoded training pairs, dev pairs and bucketed training batches."""

    train: list[Pair]
    test: list[Pair]
    batches: list[list[int]]
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary

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
    return Workload(train, test, batches, src_vocab, tgt_vocab)


@dataclass
class TrainingSpeed:
    tokens_per_second: float      # median over the timed windows
    windows: list[float]
    steps: int
    model: torch.nn.Module


def new_training(config: ModelConfig, work: Workload, seed: int = 0
                 ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A freshly initialised model of ``config`` for ``work``'s vocabularies (seeded), in train
    mode, with the benchmark's optimiser (Adam, lr 1e-3)."""
    torch.manual_seed(seed)
    model = build_model(config, len(work.src_vocab), len(work.tgt_vocab)).train()
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def measure_training(config: ModelConfig, work: Workload, windows: int = 5, window_steps: int = 20,
                     warmup: int = 5, seed: int = 0) -> TrainingSpeed:
    """Train ``config`` with Adam on real batches; target tokens/s per window of steps."""
    model, optimizer = new_training(config, work, seed)
    rates, step = [], 0
    for window in range(-1, windows):
        steps = warmup if window < 0 else window_steps
        tokens, start = 0, time.perf_counter()
        for _ in range(steps):
            tokens += train_step(model, optimizer, work.batch(step))
            step += 1
        if window >= 0:
            rates.append(tokens / (time.perf_counter() - start))
    return TrainingSpeed(statistics.median(rates), rates, step, model.eval())


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> int:
    """One teacher-forced step (forward, backward, clipping, Adam); returns target tokens.

    The phases are marked for the profiler (:mod:`rnnsearch.bench.profile`).
    """
    with record_function("forward"):
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)      # batch x T x V
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID)
    optimizer.zero_grad(set_to_none=True)
    with record_function("backward"):
        loss.backward()
    with record_function("clip"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with record_function("optimizer"):
        optimizer.step()
    return batch.target_tokens
