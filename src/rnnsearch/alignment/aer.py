"""Alignment error rate (Och & Ney 2003) of links A against Sure gold links S within Possible P::

    precision = |A ∩ P| / |A|     recall = |A ∩ S| / |S|
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

counted over all sentences together; :func:`paired_bootstrap_aer` compares two aligners."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from rnnsearch.alignment import Link

COUNTS = ("links", "sure_found", "possible_found", "sure")   # |A|, |A ∩ S|, |A ∩ P|, |S|


def sentence_counts(predicted: Iterable[set[Link]], sure: Iterable[frozenset[Link]],
                    possible: Iterable[frozenset[Link]]) -> np.ndarray:
    """AER's sufficient statistics per sentence: sentences x 4 (:data:`COUNTS`)."""
    rows = [(len(links), len(links & s), len(links & (p | s)), len(s))
            for links, s, p in zip(predicted, sure, possible, strict=True)]
    return np.array(rows, dtype=np.int64).reshape(-1, len(COUNTS))


def aer_of_counts(counts: np.ndarray) -> np.ndarray:
    """AER of summed counts (last axis :data:`COUNTS`, any leading axes); 0 where |A| + |S| = 0."""
    links, sure_found, possible_found, sure = np.moveaxis(counts, -1, 0)
    total = links + sure
    return np.where(total > 0, 1.0 - (sure_found + possible_found) / np.maximum(total, 1), 0.0)


def paired_bootstrap_aer(system: np.ndarray, baseline: np.ndarray, samples: int, seed: int
                         ) -> float:
    """The p-value of the AER difference of ``system`` and ``baseline`` (:func:`sentence_counts`
    of the same sentences) by sacreBLEU's paired bootstrap (Koehn 2004), +1 smoothed."""
    if system.shape != baseline.shape:
        raise ValueError(f"the systems' counts differ in shape: {system.shape} and "
                         f"{baseline.shape} (not the same sentences)")
    n = system.shape[0]
    picks = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    diffs = np.abs(aer_of_counts(system[picks].sum(1)) - aer_of_counts(baseline[picks].sum(1)))
    real = abs(float(aer_of_counts(system.sum(0)) - aer_of_counts(baseline.sum(0))))
    return float((np.sum(diffs - diffs.mean() > real) + 1) / (samples + 1))


def alignment_scores(predicted: Iterable[set[Link]], sure: Iterable[frozenset[Link]],
                     possible: Iterable[frozenset[Link]]) -> dict[str, float | int]:
    """AER, precision and recall of predicted link sets against the gold, and the counts."""
    a, a_s, a_p, s_total = (int(n) for n in sentence_counts(predicted, sure, possible).sum(0))
    return {"aer": 1.0 - (a_s + a_p) / (a + s_total) if a + s_total else 0.0,
            "precision": a_p / a if a else 0.0,
            "recall": a_s / s_total if s_total else 0.0,
            "links": a, "sure_found": a_s, "possible_found": a_p, "sure": s_total}


def diagonal_links(e_len: int, f_len: int) -> set[Link]:
    """Diagonal baseline: French word ``j`` -> English word ``j * |e| / |f|``, rounded half up."""
    return {(min(int(j * e_len / f_len + 0.5), e_len - 1), j) for j in range(f_len)} if e_len else set()
