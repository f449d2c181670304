"""The output layer and its training loss, eager beside fused (``train.trainer.fused_loss``):
peak memory and seconds per step.

    python -m rnnsearch.bench.output_layer [--positions 4000] [--width 500] [--vocab 30000]

Each way runs in a process of its own (peak resident memory, Linux's ``VmHWM``, is per
process), on random features of ``positions x width`` (the output layer's input), an output
layer to ``vocab`` words and random targets: forward and backward ``--steps`` times after one
untimed step. The table gives the peak memory above what the process held before its first step,
and the median seconds per step. The defaults are the paper's shapes: batches of 80 sentences of
50 target words, the 500-wide maxout output, 30,000 words (Bahdanau et al. 2015).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from rnnsearch.bench.subwords import own_peak_rss_mb
from rnnsearch.bench.table import markdown_table
from rnnsearch.command import entry_point
from rnnsearch.training.fused_loss import linear_cross_entropy

WAYS = {"eager": "eager: logits, log-softmax, cross-entropy",
        "fused": "fused: `train.trainer.fused_loss: true`"}


def measure(way: str, positions: int, width: int, vocab: int, steps: int) -> dict[str, float]:
    """Peak memory (MiB above the start) and median seconds per step of ``way``, in this process.

    The start is taken after a step at a tiny shape, which loads the kernels and thread pools
    (some tens of MiB that would otherwise count as the way's own)."""
    _step(way, *_problem(8, width, 16))
    problem = _problem(positions, width, vocab)
    start_mb, seconds = own_peak_rss_mb(), []
    for step in range(steps + 1):
        began = time.perf_counter()
        _step(way, *problem)
        if step:                                      # the first step is untimed
            seconds.append(time.perf_counter() - began)
    return {"peak_mb": own_peak_rss_mb() - start_mb, "seconds_per_step": statistics.median(seconds)}


def _problem(positions: int, width: int, vocab: int) -> tuple[torch.Tensor, ...]:
    """Random features (N x O), output weight (V x O) and bias (V), targets (N)."""
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(positions, width, generator=generator).requires_grad_()
    weight = (torch.randn(vocab, width, generator=generator) * 0.05).requires_grad_()
    bias = torch.zeros(vocab, requires_grad=True)
    return features, weight, bias, torch.randint(1, vocab, (positions,), generator=generator)


def _step(way: str, features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
          targets: torch.Tensor) -> None:
    """Forward and backward of the summed loss, ``way``'s way; the gradients then dropped."""
    if way == "eager":
        loss = F.cross_entropy(F.linear(features, weight, bias), targets, reduction="sum")
    else:
        loss = linear_cross_entropy(features, weight, bias, targets)
    loss.backward()
    for tensor in (features, weight, bias):
        tensor.grad = None


@entry_point("bench.output_layer")
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rnnsearch.bench.output_layer``: the output layer's memory and time, each way
    in a process of its own."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=80 * 50, help="target words a batch")
    parser.add_argument("--width", type=int, default=500, help="the output layer's input width")
    parser.add_argument("--vocab", type=int, default=30000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--one", choices=WAYS, help=argparse.SUPPRESS)   # a child process's way
    args = parser.parse_args(argv)
    shape = (args.positions, args.width, args.vocab, args.steps)
    if args.one:
        print(json.dumps(measure(args.one, *shape)))
        return 0
    results = {way: _in_own_process(way, args) for way in WAYS}
    print(f"Output layer and loss, {args.positions} positions x {args.width} -> {args.vocab} "
          f"words, {torch.get_num_threads()} threads, median of {args.steps} steps:\n")
    print("\n".join(markdown_table(
        ["way", "peak memory MiB (above the start)", "seconds per step"],
        [[WAYS[way], f"{r['peak_mb']:,.0f}", f"{r['seconds_per_step']:.3f}"]
         for way, r in results.items()])))
    return 0


def _in_own_process(way: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "rnnsearch.bench.output_layer", "--one", way,
               "--positions", str(args.positions), "--width", str(args.width),
               "--vocab", str(args.vocab), "--steps", str(args.steps)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
