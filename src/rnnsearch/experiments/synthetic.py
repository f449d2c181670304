"""Synthetic check of the bottleneck, no corpus needed: reverse (or copy) 20-40 random symbols.

    python -m rnnsearch.experiments.synthetic                 # about 5 minutes on 2 idle CPU cores
    python -m rnnsearch.experiments.synthetic --task copy --steps 800 --out synthetic.json

Trains RNNencdec and RNNsearch of equal sizes, decodes held-out sequences greedily (reference
length) and reports token accuracy and exact matches per source length: attention stays
near-perfect, RNNencdec's fixed summary degrades with length (Bahdanau et al., Fig. 2)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from rnnsearch.command import run_command
from rnnsearch.config.base import at_least
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.vocab import BOS_ID, PAD_ID
from rnnsearch.models.seq2seq import Seq2Seq, build_model
from rnnsearch.reporting.tables import Table, fmt
from rnnsearch.training.data import Batch, collate
from rnnsearch.training.harness import train_step
from rnnsearch.training.module import TranslationTask

FIRST_SYMBOL = 4  # ids 0-3 are <pad> <unk> <s> </s>


@dataclass(frozen=True)
class SymbolTask:
    """Reverse (or copy) sequences of ``min_len``-``max_len`` of ``symbols`` random symbols."""

    task: str = "reverse"           # reverse or copy
    symbols: int = 20
    min_len: int = 20
    max_len: int = 40

    def sample(self, generator: torch.Generator, size: int, lengths: tuple[int, int] | None = None
               ) -> Batch:
        """``size`` random sequences (of ``lengths``, default the task's) and their reversal
        (or copy), as a padded :class:`Batch`."""
        low, high = lengths or (self.min_len, self.max_len)
        pairs = []
        for n in torch.randint(low, high + 1, (size,), generator=generator).tolist():
            src = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + self.symbols, (n,),
                                generator=generator).tolist()
            pairs.append((src, src[::-1] if self.task == "reverse" else list(src)))
        return collate(pairs)


def train(model: Seq2Seq, optim: OptimConfig, task: SymbolTask, batch_size: int, steps: int,
          max_minutes: float, generator: torch.Generator) -> tuple[int, float]:
    """The train stage's steps (:func:`rnnsearch.training.harness.train_step`: ``optim``'s optimiser
    and clipping) on fresh batches until ``steps`` or ``max_minutes``; returns (steps, seconds)."""
    trainer = TranslationTask(model, optim)
    optimizer = trainer.configure_optimizers()
    start, step = time.perf_counter(), 0
    model.train()
    while step < steps and time.perf_counter() - start < max_minutes * 60:
        loss = train_step(trainer, optimizer, task.sample(generator, batch_size))
        step += 1
        if step % 100 == 0:
            print(f"  step {step}: loss {loss.item():.3f}", flush=True)
    return step, time.perf_counter() - start


@torch.no_grad()
def greedy_outputs(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Greedy output ids, as many steps as the longest reference (batch x tgt_len)."""
    model.eval()
    memory = model.encode(batch.src, batch.src_len)
    state = model.init_state(memory)
    prev = torch.full((batch.src.size(0),), BOS_ID, dtype=torch.long)
    outputs = []
    for _ in range(batch.tgt_out.size(1)):
        logits, state, _ = model.step(prev, state, memory)
        prev = logits.argmax(-1)
        outputs.append(prev)
    return torch.stack(outputs, 1)


def evaluate(model: Seq2Seq, task: SymbolTask, buckets: list[tuple[int, int]], size: int,
             seed: int) -> dict:
    """Token accuracy and exact match (``</s>`` included) per source-length bucket, ``size``
    sequences each (drawn with ``seed``)."""
    generator = torch.Generator().manual_seed(seed)
    results = {}
    for low, high in buckets:
        batch = task.sample(generator, size, (low, high))
        predicted = greedy_outputs(model, batch)
        real = batch.tgt_out != PAD_ID
        correct = (predicted == batch.tgt_out) & real
        exact = (correct | ~real).all(1)
        results[f"{low}-{high}"] = {"token_accuracy": float(correct.sum() / real.sum()),
                                    "exact_match": float(exact.float().mean())}
    return results


def length_buckets(min_len: int, max_len: int, width: int = 5) -> list[tuple[int, int]]:
    """``[(20, 24), (25, 29), (30, 34), (35, 40)]`` for 20-40: the last bucket takes the rest."""
    lows = list(range(min_len, max_len + 1, width))
    if len(lows) > 1 and max_len - lows[-1] + 1 < width:
        lows.pop()
    return [(low, high - 1) for low, high in zip(lows, lows[1:] + [max_len + 1])]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["reverse", "copy"], default="reverse")
    parser.add_argument("--symbols", type=at_least(1), default=20)
    parser.add_argument("--min-len", type=at_least(1), default=20)
    parser.add_argument("--max-len", type=at_least(1), default=40)
    parser.add_argument("--embedding", type=at_least(1), default=32)
    parser.add_argument("--hidden", type=at_least(1), default=64)
    parser.add_argument("--batch", type=at_least(1), default=64)
    parser.add_argument("--lr", type=at_least(0, float), default=0.003)
    parser.add_argument("--steps", type=at_least(1), default=1500)
    parser.add_argument("--max-minutes", type=at_least(0, float), default=8.0,
                        help="per model, a safety cap: both models should get the same --steps")
    parser.add_argument("--test-size", type=at_least(1), default=200, help="sequences per length bucket")
    parser.add_argument("--threads", type=at_least(0), default=0)
    parser.add_argument("--seed", type=at_least(0), default=1234)
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    buckets = length_buckets(args.min_len, args.max_len)
    task = SymbolTask(args.task, args.symbols, args.min_len, args.max_len)
    report = {"settings": vars(args) | {"out": str(args.out)}, "models": {}}
    for name in ("encdec", "search"):
        torch.manual_seed(args.seed)
        config = ModelConfig(model=name, embedding_size=args.embedding, hidden_size=args.hidden,
                             attention_size=args.hidden, output_size=args.hidden)
        model = build_model(config, FIRST_SYMBOL + args.symbols, FIRST_SYMBOL + args.symbols)
        print(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
        steps, seconds = train(model, OptimConfig(lr=args.lr), task, args.batch, args.steps,
                               args.max_minutes, torch.Generator().manual_seed(args.seed))
        scores = evaluate(model, task, buckets, args.test_size, args.seed + 1)
        report["models"][name] = {"steps": steps, "seconds": round(seconds, 1), "buckets": scores}
    print(table(report).markdown(), end="")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def table(report: dict) -> Table:
    """A row per length bucket, token accuracy / exact match per model; each model's steps below."""
    models = report["models"]
    buckets = next(iter(models.values()))["buckets"]
    header = ("source length", *(f"{m} {what}" for m in models for what in ("tok acc", "exact")))
    rows = tuple((bucket, *(fmt(models[m]["buckets"][bucket][name], 3) for m in models
                            for name in ("token_accuracy", "exact_match")))
                 for bucket in buckets)
    steps = "steps: " + ", ".join(f"{m} {v['steps']} in {v['seconds']} s"
                                  for m, v in models.items())
    return Table(f"{report['settings']['task']}: accuracy by source length", header, rows,
                 (steps,))


if __name__ == "__main__":
    sys.exit(run_command("synthetic", main))
