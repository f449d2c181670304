"""Evaluate word vectors: word-similarity correlation, nearest neighbours, a 2-D projection.

Similarity: Spearman's rho on WordSim-353 and SimLex-999 (English) and the share of OOV pairs
skipped; with subword units a word's vector is its pieces' mean. Probe words' neighbours show
whichever senses the corpus uses (a static vector mixes them). Projection: frequent words."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from gensim.models import KeyedVectors  # noqa: E402
from gensim.test.utils import datapath  # noqa: E402

SIMILARITY_SETS = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}
PIECE_RULE = "mean of its pieces' vectors"
Pieces = Callable[[str], list[str]]    # a word -> its units (word units: the word itself)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _read_pairs(path: str) -> Iterator[tuple[str, str]]:
    """The lower-cased word pairs of a tab-separated test set (comments and blank lines skipped)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                first, second = line.lower().split("\t")[:2]
                yield first, second


def _pair_coverage(kv: KeyedVectors, path: str) -> tuple[int, int]:
    """(pairs with both words in ``kv``, all pairs) of a tab-separated test set, ignoring case."""
    known = {key.lower() for key in kv.key_to_index}
    covered = total = 0
    for first, second in _read_pairs(path):
        total += 1
        covered += first in known and second in known
    return covered, total


def word_similarity(kv: KeyedVectors) -> dict[str, dict[str, Any]]:
    """``{set: {"spearman", "pearson", "oov_ratio", "pairs"}}`` for the English test sets;
    ``oov_ratio``: share of pairs skipped; correlations: ``None`` under 3 covered pairs."""
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


def piece_word_vectors(kv: KeyedVectors, words: Sequence[str], pieces_of: Pieces
                       ) -> tuple[KeyedVectors, dict[str, int]]:
    """Each word's mean piece vector (none where ``kv`` lacks a piece), and the counts ``words``,
    ``with_vector`` and ``split`` (vectors made of several pieces)."""
    keys, vectors, split = [], [], 0
    for word in words:
        pieces = pieces_of(word)
        if pieces and all(p in kv.key_to_index for p in pieces):
            keys.append(word)
            vectors.append(kv[pieces].mean(axis=0))          # d
            split += len(pieces) > 1
    composed = KeyedVectors(kv.vector_size, count=0, dtype=kv.vectors.dtype)
    if keys:
        composed.add_vectors(keys, np.stack(vectors))        # words x d
    return composed, {"words": len(words), "with_vector": len(keys), "split": split}


def subword_similarity(kv: KeyedVectors, pieces_of: Pieces) -> dict[str, dict[str, Any]]:
    """:func:`word_similarity` of piece vectors via :func:`piece_word_vectors`, whose counts
    ``similarity_words`` records."""
    words = sorted({w for f in SIMILARITY_SETS.values() for pair in _read_pairs(datapath(f))
                    for w in pair})
    composed, counts = piece_word_vectors(kv, words, pieces_of)
    return {**word_similarity(composed), "similarity_words": {"vector": PIECE_RULE, **counts}}


def nearest_neighbours(kv: KeyedVectors, probes: Sequence[str], n: int,
                       pieces_of: Pieces = lambda word: [word]) -> list[dict[str, Any]]:
    """Rows ``{"probe", "rank", "neighbour", "cosine"}``: the ``n`` cosine neighbours per probe
    (with subword units, ``pieces_of``: of the mean of the probe's pieces, the pieces left out).
    Probe words the vectors lack (a piece of them) are skipped."""
    rows = []
    for probe in probes:
        pieces = pieces_of(probe)
        if not pieces or any(p not in kv.key_to_index for p in pieces):
            continue
        for rank, (word, cosine) in enumerate(kv.most_similar(pieces, topn=n), 1):
            rows.append({"probe": probe, "rank": rank, "neighbour": word, "cosine": round(cosine, 4)})
    return rows


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """Project ``[n, d]`` vectors on their first two principal components: ``[n, 2]``; where
    there are fewer (one vector, or ``d`` = 1) the missing coordinates are 0."""
    centred = vectors - vectors.mean(axis=0, keepdims=True)  # n x d
    _, _, vt = np.linalg.svd(centred, full_matrices=False)  # vt: min(n, d) x d
    points = centred @ vt[:2].T  # n x min(2, n, d)
    return np.pad(points, ((0, 0), (0, 2 - points.shape[1])))  # n x 2


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
