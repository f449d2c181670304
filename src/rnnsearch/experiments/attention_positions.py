"""Where attention looks: each target word's attention centre ``sum_i alpha_ji * i`` against the
diagonal ``(j + 1/2) * S / T`` (mean distance / S, correlation along the sentence), and for
local-p the window centre ``p_t / S`` (mean, and spread: about 0.29 for a centre sweeping the
sentence, 0 for one that never moves). Teacher-forced on a tokenised split:

    python -m rnnsearch.experiments.attention_positions data/models/search-50/model.pt \
        data/models/luong_local_p-50/model.pt --data data/tokenized --split dev
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.data.textio import read_parallel
from rnnsearch.errors import DataError
from rnnsearch.reporting.tables import Table, fmt

STATS = ("centre_error", "centre_correlation", "window_centre", "window_spread", "window_error",
         "window_correlation")


def diagonal(tgt_len: int, src_len: int) -> np.ndarray:
    """The diagonal's source position for each target word: ``(j + 1/2) * S / T`` (T,)."""
    return (np.arange(tgt_len) + 0.5) * src_len / tgt_len


def teacher_forced(model: Any, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                   batch_size: int) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Per pair, the attention weights (T x S) and, for local-p, the window centres p_t (T,)."""
    from rnnsearch.alignment.attention import forced_attention

    position = getattr(model.decoder.attention, "position", None)    # local-p only
    calls: list[torch.Tensor] = []
    hook = position.register_forward_hook(
        lambda _module, _inputs, out: calls.append(torch.sigmoid(out.squeeze(-1)).float())
    ) if position is not None else None
    matrices, centres = [], []
    try:
        for start in range(0, len(sources), batch_size):
            calls.clear()
            batch = forced_attention(model, sources[start:start + batch_size],
                                     targets[start:start + batch_size], batch_size)
            matrices += batch
            if calls:
                fraction = torch.cat(calls, dim=1).cpu().numpy()   # batch x T, one call a step
                centres += [fraction[b, :w.shape[0]] * w.shape[1] for b, w in enumerate(batch)]
    finally:
        if hook is not None:
            hook.remove()
    return matrices, (centres if position is not None else None)


def _distance_and_correlation(centre: np.ndarray, src_len: int) -> tuple[float, float]:
    """Mean |centre - diagonal| / S and their correlation along the sentence (0 if constant)."""
    diag = diagonal(len(centre), src_len)
    moving = centre.std() > 1e-9 and len(centre) > 1
    correlation = float(np.corrcoef(centre, diag)[0, 1]) if moving else 0.0
    return float(np.abs(centre - diag).mean() / src_len), correlation


def summarise(matrices: Sequence[np.ndarray], centres: Sequence[np.ndarray] | None
              ) -> dict[str, float]:
    """Means over sentences of the statistics in the module docstring (``window_*``: local-p)."""
    rows = []
    for k, weights in enumerate(matrices):
        src_len = weights.shape[1]
        centre = weights @ np.arange(src_len)                               # T
        row = dict(zip(STATS[:2], _distance_and_correlation(centre, src_len)))
        if centres is not None:
            window = centres[k]
            row.update(window_centre=float(window.mean() / src_len),
                       window_spread=float(window.std() / src_len))
            row.update(zip(STATS[4:], _distance_and_correlation(window, src_len)))
        rows.append(row)
    return {name: float(np.mean([r[name] for r in rows])) for name in rows[0]} if rows else {}


def read_pairs(data: Path, split: str, sentences: int, min_len: int, max_len: int
               ) -> tuple[list[list[str]], list[list[str]]]:
    """The first ``sentences`` pairs of ``<data>/<split>.src|tgt`` whose source has
    ``min_len``..``max_len`` words (tokenised, space-separated)."""
    sources, targets = read_parallel(data / f"{split}.src", data / f"{split}.tgt")
    pairs = [(s.split(), t.split()) for s, t in zip(sources, targets)
             if min_len <= len(s.split()) <= max_len and t.strip()][:sentences]
    return [s for s, _ in pairs], [t for _, t in pairs]


def measure(model_path: Path, data: Path, sources: list[list[str]], targets: list[list[str]],
            batch_size: int) -> dict[str, Any]:
    """One model's statistics on the pairs (an error entry when it has no attention)."""
    from rnnsearch.data.vocab import Vocabulary
    from rnnsearch.models.seq2seq import load_model

    model = load_model(model_path)
    if getattr(model.decoder, "attention", None) is None:
        return {"model": str(model_path), "error": "no attention (RNNencdec)"}
    vocabs = [Vocabulary.load(data / f"vocab.{side}.txt") for side in ("src", "tgt")]
    matrices, centres = teacher_forced(model, [vocabs[0].encode(s) for s in sources],
                                       [vocabs[1].encode(t) for t in targets], batch_size)
    return {"model": str(model_path), "sentences": len(matrices), **summarise(matrices, centres)}


def table(rows: Sequence[dict[str, Any]], split: str) -> Table:
    """The rows as a table (– where a statistic does not apply; a model without attention has
    its reason in the sentences column)."""
    header = ("model", "sentences", *STATS)
    cells = tuple(tuple(row["error"] if name == "sentences" and "error" in row
                        else fmt(row.get(name), 3) for name in header)
                  for row in rows)
    return Table(f"Where attention looks ({split} pairs)", header, cells)


@entry_point("attention_positions")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.experiments.attention_positions",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", type=Path, help="model.pt files of the train stage")
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="tokenised splits and vocabularies (default: data/tokenized)")
    parser.add_argument("--split", default="dev", help="split to read (default: dev)")
    parser.add_argument("--sentences", type=at_least(1), default=200)
    parser.add_argument("--min-len", type=at_least(1), default=10, help="shortest source kept")
    parser.add_argument("--max-len", type=at_least(1), default=50, help="longest source kept")
    parser.add_argument("--batch-size", type=at_least(1), default=32)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    sources, targets = read_pairs(args.data, args.split, args.sentences, args.min_len, args.max_len)
    if not sources:
        raise DataError(f"{args.data}/{args.split}.src: no pair with a source of "
                        f"{args.min_len}-{args.max_len} words")
    rows = [measure(path, args.data, sources, targets, args.batch_size) for path in args.models]
    print(table(rows, args.split).markdown(), end="")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
