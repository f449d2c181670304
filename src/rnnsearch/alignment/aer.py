"""Alignment error rate (Och & Ney 2003) with Sure and Possible gold links, over a corpus::

    precision = |A ∩ P| / |A|     recall = |A ∩ S| / |S|
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

counted over every sentence together (not averaged per sentence), S within P.
"""
from __future__ import annotations

from typing import Iterable

from rnnsearch.alignment import Link


def alignment_scores(predicted: Iterable[set[Link]], sure: Iterable[frozenset[Link]],
                     possible: Iterable[frozenset[Link]]) -> dict[str, float | int]:
    """AER, precision and recall of predicted link sets against the gold, and the counts."""
    a = a_s = a_p = s_total = 0
    for links, s, p in zip(predicted, sure, possible, strict=True):
        a += len(links)
        a_s += len(links & s)
        a_p += len(links & (p | s))
        s_total += len(s)
    return {"aer": 1.0 - (a_s + a_p) / (a + s_total) if a + s_total else 0.0,
            "precision": a_p / a if a else 0.0,
            "recall": a_s / s_total if s_total else 0.0,
            "links": a, "sure_found": a_s, "possible_found": a_p, "sure": s_total}


def diagonal_links(e_len: int, f_len: int) -> set[Link]:
    """The diagonal baseline: French word ``j`` aligned to English position ``j * |e| / |f|``
    (0-based, rounded half up)."""
    return {(min(int(j * e_len / f_len + 0.5), e_len - 1), j) for j in range(f_len)} if e_len else set()
