"""Attention as alignment: force-decode the gold target sentence (teacher forcing) and read the
attention weights; links are each target word's most attended source word, or every source word
whose weight reaches a threshold."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from rnnsearch.alignment import Link
from rnnsearch.data.vocab import BOS_ID, PAD_ID


def pad(rows: Sequence[Sequence[int]], prefix: Sequence[int] = ()) -> torch.Tensor:
    """batch x max_len ids, ``prefix`` first, padded with ``<pad>``."""
    width = max(len(prefix) + len(r) for r in rows)
    out = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for b, row in enumerate(rows):
        out[b, :len(prefix) + len(row)] = torch.tensor(list(prefix) + list(row), dtype=torch.long)
    return out


def forced_attention(model: Any, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                     batch_size: int = 32) -> list[np.ndarray]:
    """Per sentence pair, the tgt_len x src_len attention weights of teacher-forced decoding:
    row ``j`` is the attention that produced target word ``j`` (``</s>`` not included).

    ``model(src, src_len, tgt_in)`` returns logits and weights batch x T x S (``Seq2Seq``).
    """
    matrices = []
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            src, tgt = sources[start:start + batch_size], targets[start:start + batch_size]
            lengths = torch.tensor([len(s) for s in src])
            _, weights = model(pad(src), lengths, pad(tgt, [BOS_ID]))       # batch x T x S
            if weights is None:
                raise ValueError("the model has no attention to read alignments from")
            weights = weights.float().cpu().numpy()
            matrices += [weights[b, :len(t), :len(s)] for b, (s, t) in enumerate(zip(src, tgt))]
    return matrices


def argmax_links(weights: np.ndarray) -> set[Link]:
    """``(source, target)`` links: each target word's most attended source word."""
    return {(int(i), j) for j, i in enumerate(weights.argmax(1))} if weights.size else set()


def threshold_links(weights: np.ndarray, threshold: float) -> set[Link]:
    """``(source, target)`` links: every source word with weight >= ``threshold``."""
    targets, sources = np.nonzero(weights >= threshold)
    return {(int(i), int(j)) for j, i in zip(targets, sources)}
