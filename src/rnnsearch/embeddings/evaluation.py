"""Evaluate word vectors: word-similarity correlation, nearest neighbours, a 2-D projection.

* Word similarity (English only): Spearman's rho between cosine similarity and human scores on
  WordSim-353 and SimLex-999 (both ship with gensim). Pairs with a word the vectors lack are
  skipped, so the score always comes with its OOV ratio (the fraction of pairs skipped); on a
  small corpus such as Multi30k most pairs are out of vocabulary and rho is over a few dozen pairs.
* Nearest neighbours: cosine neighbours of probe words. A static vector mixes every sense of a
  word (``bank``): the neighbours show whichever senses the corpus uses, nothing more.
* Projection: the most frequent words on their first two principal components.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from gensim.models import KeyedVectors  # noqa: E402
from gensim.test.utils import datapath  # noqa: E402

SIMILARITY_SETS = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _pair_coverage(kv: KeyedVectors, path: str) -> tuple[int, int]:
    """(pairs with both words in ``kv``, all pairs) of a tab-separated test set, ignoring case."""
    known = {key.lower() for key in kv.key_to_index}
    covered = total = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                first, second = line.lower().split("\t")[:2]
                total += 1
                covered += first in known and second in known
    return covered, total


def word_similarity(kv: KeyedVectors) -> dict[str, dict[str, Any]]:
    """``{set: {"spearman", "pearson", "oov_ratio", "pairs"}}`` for the English test sets.

    ``oov_ratio`` is the fraction of pairs skipped; the correlations are ``None`` when fewer
    than three pairs are covered.
    """
    results = {}
    for name, filename in SIMILARITY_SETS.items():
        path = datapath(filename)
        covered, total = _pair_coverage(kv, path)
        scores: dict[str, Any] = {"spearman": None, "pearson": None,
                                  "oov_ratio": 1 - covered / total, "pairs": covered}
        if covered >= 3:
            pearson, spearman, _ = kv.evaluate_word_pairs(path, case_insensitive=True)
            scores.update(spearman=_finite(spearman.statistic), pearson=_finite(pearson[0]))
        results[name] = scores
    return results


def nearest_neighbours(kv: KeyedVectors, probes: Sequence[str], n: int) -> list[dict[str, Any]]:
    """Rows ``{"probe", "rank", "neighbour", "cosine"}``: the ``n`` cosine neighbours per probe.

    Probe words the vectors lack are skipped.
    """
    rows = []
    for probe in probes:
        if probe not in kv.key_to_index:
            continue
        for rank, (word, cosine) in enumerate(kv.most_similar(probe, topn=n), 1):
            rows.append({"probe": probe, "rank": rank, "neighbour": word, "cosine": round(cosine, 4)})
    return rows


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """Project ``[n, d]`` vectors on their first two principal components: ``[n, 2]``."""
    centred = vectors - vectors.mean(axis=0, keepdims=True)  # n x d
    _, _, vt = np.linalg.svd(centred, full_matrices=False)  # vt: min(n, d) x d
    return centred @ vt[:2].T  # n x 2


def projection_figure(kv: KeyedVectors, n_words: int, title: str) -> plt.Figure:
    """A scatter plot of the ``n_words`` most frequent words on two principal components."""
    words = kv.index_to_key[:n_words]  # gensim keeps keys sorted by descending frequency
    points = pca_2d(kv[words])  # n x 2
    fig, ax = plt.subplots(figsize=(12, 10))
    ax.scatter(points[:, 0], points[:, 1], s=4, alpha=0.4)
    for word, (x, y) in zip(words, points):
        ax.annotate(word, (x, y), fontsize=6, alpha=0.8)
    ax.set_title(title)
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    fig.tight_layout()
    return fig
