"""Which test sentences a score is computed on: the no-UNK subset and source-length buckets."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rnnsearch.data.vocab import Vocabulary


def no_unk_indices(src_lines: Sequence[str], tgt_lines: Sequence[str], src_vocab: Vocabulary,
                   tgt_vocab: Vocabulary) -> list[int]:
    """Sentences whose tokenised source and reference have no word outside the vocabularies
    (Bahdanau et al.'s "No UNK" column)."""
    return [i for i, (src, tgt) in enumerate(zip(src_lines, tgt_lines))
            if all(w in src_vocab for w in src.split()) and all(w in tgt_vocab for w in tgt.split())]


@dataclass(frozen=True)
class Bucket:
    """Sentences with ``lo < source length <= hi`` (the first includes 0; ``hi`` None: open);
    ``step``, the curves' x value, is ``hi`` (one width past the last edge when open)."""

    label: str
    lo: int
    hi: int | None
    step: int
    indices: tuple[int, ...]


def length_buckets(lengths: Sequence[int], edges: Sequence[int]) -> list[Bucket]:
    """Buckets ``0-e1, e1-e2, ..., e_last+`` of source lengths (edges ascending)."""
    bounds = [0, *edges]
    width = edges[-1] - (edges[-2] if len(edges) > 1 else 0)
    buckets = []
    for lo, hi in zip(bounds, [*edges, None]):
        inside = tuple(i for i, n in enumerate(lengths)
                       if (n > lo or lo == 0) and (hi is None or n <= hi))
        label = f"{lo}-{hi}" if hi is not None else f"{lo}+"
        buckets.append(Bucket(label, lo, hi, hi if hi is not None else lo + width, inside))
    return buckets
