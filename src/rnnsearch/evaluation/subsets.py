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


MIN_FILLED_BUCKETS = 3       # fewer buckets of evaluate.min_bucket_sentences: derive the edges
DERIVED_BUCKETS = 5          # how many buckets derived edges aim at


def filled_buckets(lengths: Sequence[int], edges: Sequence[int], min_sentences: int) -> int:
    """How many of the buckets ``edges`` cut ``lengths`` into hold ``min_sentences`` or more."""
    return sum(len(b.indices) >= min_sentences for b in length_buckets(lengths, edges))


def quantile_edges(lengths: Sequence[int], min_sentences: int,
                   buckets: int = DERIVED_BUCKETS) -> tuple[int, ...]:
    """Integer edges cutting ``lengths`` at quantiles into about ``buckets`` equal buckets (fewer
    where many sentences share a length), the smallest merged into its smaller neighbour until
    each holds ``min_sentences``; empty when no edge leaves two such buckets."""
    ordered = sorted(lengths)
    if not ordered:
        return ()
    cuts = {ordered[-(-k * len(ordered) // buckets) - 1] for k in range(1, buckets)}
    edges = sorted(edge for edge in cuts if edge < ordered[-1])   # the open bucket not empty
    while edges:
        counts = [len(b.indices) for b in length_buckets(ordered, edges)]
        small = min(range(len(counts)), key=counts.__getitem__)
        if counts[small] >= min_sentences:
            break
        # bucket i lies between edges i-1 and i: drop the edge towards its smaller neighbour
        right = small == 0 or (small < len(edges) and counts[small + 1] < counts[small - 1])
        edges.pop(small if right else small - 1)
    return tuple(edges)


def derived_edges(lengths: Sequence[int], edges: Sequence[int], min_sentences: int
                  ) -> tuple[int, ...] | None:
    """:func:`quantile_edges` of ``lengths`` when ``edges`` (``evaluate.buckets``) fill fewer than
    :data:`MIN_FILLED_BUCKETS` buckets of ``min_sentences`` and those fill more; else None."""
    filled = filled_buckets(lengths, edges, min_sentences)
    if filled >= MIN_FILLED_BUCKETS:
        return None
    derived = quantile_edges(lengths, min_sentences)
    if not derived or filled_buckets(lengths, derived, min_sentences) <= filled:
        return None
    return derived
