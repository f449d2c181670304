"""Sense-split word vectors: one vector per sense of an ambiguous word instead of one for all.

As the course notes propose, each occurrence is described by its context (the unit-length mean of
unit-length vectors within ``window``, so k-means clusters by cosine), clustered (k fixed or the
best silhouette in ``2 .. max_k``, on a seeded sample of at most ``max_occurrences_clustered``),
relabelled ``word_1`` ... ``word_k`` (most frequent first), and word2vec is retrained. A k leaving a
sense rarer than ``embed.min_count`` is never chosen; a word every k fails is :class:`NotSplit`."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from gensim.models import KeyedVectors
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

from rnnsearch.config.senses import SensesConfig
from rnnsearch.embeddings.evaluation import pca_2d
from rnnsearch.errors import NotSplit

Position = tuple[int, int]          # (sentence index, token index)
KMEANS_RESTARTS = 10
DIGITS = 4                          # cosines, silhouettes and coordinates in the metrics


@dataclass(frozen=True)
class Clustering:
    """The chosen k-means clustering of one word's occurrences."""

    k: int
    chosen_by: str                  # "fixed" (one k to try) or "silhouette"
    silhouette: dict[int, float]    # silhouette score of each k tried
    clustered: int                  # occurrences in the clustered sample
    labels: np.ndarray              # n: sense of every occurrence with a context, 0 the largest
    too_rare: dict[int, tuple[int, ...]]   # sense sizes of each k not chosen: a sense too rare
    min_size: int                   # the fewest rows a sense may have (embed.min_count)


@dataclass(frozen=True)
class SplitWord:
    """One word's occurrences and the sense (0-based) each was given."""

    word: str
    positions: tuple[Position, ...]
    senses: np.ndarray              # n_occurrences: 0 .. k-1
    clustering: Clustering
    no_context: int                 # occurrences without any context vector (sent to sense 0)
    contexts: tuple[tuple[str, ...], ...]   # per sense: its most characteristic context words

    def label(self, sense: int) -> str:
        """The token that stands for ``sense`` (0-based) in the relabelled text."""
        return sense_label(self.word, sense)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every sense's token, ``word_1`` first."""
        return tuple(self.label(s) for s in range(self.clustering.k))


def sense_label(word: str, sense: int) -> str:
    """``bank``, 0 -> ``bank_1``."""
    return f"{word}_{sense + 1}"


def find_occurrences(sentences: Sequence[Sequence[str]], words: Iterable[str]
                     ) -> dict[str, list[Position]]:
    """Every (sentence, token) position of each of ``words``, in text order (one pass)."""
    found: dict[str, list[Position]] = {word: [] for word in words}
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            if token in found:
                found[token].append((i, j))
    return found


def context_tokens(sentences: Sequence[Sequence[str]], position: Position, window: int
                   ) -> list[str]:
    """The tokens within ``window`` of ``position``, leaving out the word itself (there and
    wherever it recurs in the window)."""
    i, j = position
    sentence = sentences[i]
    around = list(sentence[max(0, j - window):j]) + list(sentence[j + 1:j + 1 + window])
    return [token for token in around if token != sentence[j]]


def context_vectors(sentences: Sequence[Sequence[str]], positions: Sequence[Position],
                    kv: KeyedVectors, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length mean context vectors ``[n, d]`` (zero rows where no context word has a
    vector) and the bool mask ``[n]`` of the rows that have one."""
    unit = kv.get_normed_vectors()                          # V x d
    points = np.zeros((len(positions), kv.vector_size), dtype=np.float64)  # n x d
    for row, position in enumerate(positions):
        ids = [kv.key_to_index[t] for t in context_tokens(sentences, position, window)
               if t in kv.key_to_index]
        if ids:
            points[row] = unit[ids].mean(axis=0)
    norms = np.linalg.norm(points, axis=1)                  # n
    found = norms > 0
    points[found] /= norms[found, None]
    return points, found


def sample_rows(n: int, cap: int, seed: int) -> np.ndarray:
    """All of ``range(n)`` when ``n <= cap``, else ``cap`` of them drawn with ``seed`` (sorted)."""
    if n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=cap, replace=False))


def _by_size(labels: np.ndarray, k: int) -> np.ndarray:
    """Renumber clusters so that 0 is the largest (ties: the lower old number first)."""
    order = np.argsort(-np.bincount(labels, minlength=k), kind="stable")
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank[labels]


def cluster_points(points: np.ndarray, ks: Sequence[int], seed: int, cap: int,
                   min_size: int = 1) -> Clustering:
    """k-means of ``points`` (``[n, d]``, unit rows) for each k in ``ks`` on a seeded sample of at
    most ``cap`` rows, then every row to its nearest centroid; the best silhouette (smaller k on a
    tie) among the ks whose clusters all have ``min_size`` rows, else :class:`NotSplit`."""
    sample = points[sample_rows(len(points), cap, seed)]    # m x d
    distinct = len(np.unique(sample, axis=0))
    # One thread: these problems are small, and OpenMP/BLAS threads spinning on a busy machine
    # made k-means 20-200x slower (measured on 2 cores beside a training run).
    with threadpool_limits(limits=1):
        fits = {k: KMeans(n_clusters=k, n_init=KMEANS_RESTARTS, random_state=seed).fit(sample)
                for k in ks if k < distinct}
        if not fits:
            raise NotSplit(f"{distinct} distinct contexts, too few for {min(ks)} senses")
        scores = {k: round(float(silhouette_score(sample, fit.labels_)), DIGITS)
                  for k, fit in fits.items()}
        labels = {k: _by_size(fit.predict(points), k) for k, fit in fits.items()}
    sizes = {k: tuple(int(n) for n in np.bincount(labels[k], minlength=k)) for k in fits}
    too_rare = {k: counts for k, counts in sizes.items() if min(counts) < min_size}
    if len(too_rare) == len(fits):
        shown = "; ".join(f"k = {k}: {'/'.join(map(str, c))}" for k, c in too_rare.items())
        raise NotSplit(f"a sense under embed.min_count {min_size} for every k tried ({shown}), "
                       f"so the retrained word2vec would give it no vector")
    best = max((k for k in fits if k not in too_rare), key=lambda k: (scores[k], -k))
    return Clustering(best, "silhouette" if len(ks) > 1 else "fixed", scores, len(sample),
                      labels[best], too_rare, min_size)


def characteristic_contexts(contexts: Sequence[Sequence[str]], senses: np.ndarray, k: int,
                            n: int, share: float = 0.05) -> tuple[tuple[str, ...], ...]:
    """Per sense, its ``n`` most typical context words: by lift ``p(t|sense) / p(t)`` over all the
    word's contexts, among words (not punctuation) seen at least ``share`` times as often as the
    sense occurs and at least 3 times, so that neither a rare word nor "the" wins."""
    overall = Counter(t for tokens in contexts for t in tokens if _is_word(t))
    total = sum(overall.values())
    typical = []
    for sense in range(k):
        counts = Counter(t for tokens, s in zip(contexts, senses) if s == sense
                         for t in tokens if _is_word(t))
        size, floor = sum(counts.values()) or 1, max(3.0, share * int((senses == sense).sum()))
        lift = {t: (c / size) / (overall[t] / total) for t, c in counts.items() if c >= floor}
        typical.append(tuple(sorted(lift, key=lambda t: (-lift[t], t))[:n]))
    return tuple(typical)


def _is_word(token: str) -> bool:
    return any(char.isalpha() for char in token)


def split_word(sentences: Sequence[Sequence[str]], word: str, positions: Sequence[Position],
               kv: KeyedVectors, cfg: SensesConfig, min_count: int = 1) -> SplitWord:
    """Cluster the occurrences of ``word`` at ``positions`` into senses of at least
    ``min_count`` occurrences each (see the module doc); :class:`NotSplit` says why not."""
    if len(positions) < cfg.min_occurrences:
        raise NotSplit(f"{len(positions)} occurrences (< senses.min_occurrences "
                       f"{cfg.min_occurrences})")
    taken = [sense_label(word, s) for s in range(max(cfg.candidate_ks))
             if sense_label(word, s) in kv.key_to_index]
    if taken:
        raise NotSplit(f"the word vectors already have the token '{taken[0]}' (a sense label)")
    points, found = context_vectors(sentences, positions, kv, cfg.window)
    # Counting the found rows only is exact: the others join sense 0, the largest one.
    clustering = cluster_points(points[found], cfg.candidate_ks, cfg.seed,
                                cfg.max_occurrences_clustered, min_count)
    senses = np.zeros(len(positions), dtype=np.int64)       # no context: the largest sense
    senses[found] = clustering.labels
    contexts = [context_tokens(sentences, p, cfg.window) for p in positions]
    typical = characteristic_contexts(contexts, senses, clustering.k, cfg.context_words)
    return SplitWord(word, tuple(positions), senses, clustering, int((~found).sum()), typical)


def relabel(sentences: Sequence[list[str]], splits: Iterable[SplitWord]) -> list[list[str]]:
    """A copy of ``sentences`` with every split word's occurrences replaced by their sense
    label; unchanged sentences are shared, not copied."""
    out = list(sentences)
    for split in splits:
        for (i, j), sense in zip(split.positions, split.senses):
            if out[i] is sentences[i]:
                out[i] = list(sentences[i])
            out[i][j] = split.label(int(sense))
    return out


def neighbours(kv: KeyedVectors, key: str, n: int, exclude: Iterable[str] = ()
               ) -> list[tuple[str, float]]:
    """The ``n`` cosine neighbours of ``key`` in ``kv``, leaving out the words in ``exclude``."""
    skip = set(exclude)
    hits = kv.most_similar(key, topn=n + len(skip))
    return [(word, round(float(cosine), DIGITS)) for word, cosine in hits if word not in skip][:n]


def projection(kv: KeyedVectors, sense_neighbours: Mapping[str, Sequence[str]]
               ) -> list[dict[str, Any]]:
    """2-D PCA of the sense vectors and their neighbours in ``kv``: one point per word, each
    with the (1-based) sense it belongs to and whether it is the sense vector itself."""
    words: dict[str, tuple[int, bool]] = {}
    for sense, label in enumerate(sense_neighbours, 1):
        words[label] = (sense, True)
    for sense, (label, near) in enumerate(sense_neighbours.items(), 1):
        for word in near:
            words.setdefault(word, (sense, False))
    points = pca_2d(kv[list(words)].astype(np.float64))     # n x 2
    return [{"word": word, "sense": sense, "is_sense": is_sense,
             "x": round(float(x), DIGITS), "y": round(float(y), DIGITS)}
            for (word, (sense, is_sense)), (x, y) in zip(words.items(), points)]


def describe(split: SplitWord, single: KeyedVectors, retrained: KeyedVectors, n: int
             ) -> dict[str, Any]:
    """What the metrics say about one split word: how k was chosen, each sense's size, typical
    contexts and neighbours in the retrained vectors (the word's other senses left out), the
    single vector's neighbours in the original vectors, and the PCA points."""
    clustering = split.clustering
    sizes = np.bincount(split.senses, minlength=clustering.k)
    senses = []
    for sense, label in enumerate(split.labels):
        others = [other for other in split.labels if other != label]
        senses.append({"label": label, "size": int(sizes[sense]),
                       "contexts": list(split.contexts[sense]),
                       "neighbours": neighbours(retrained, label, n, others)})
    single_near = neighbours(single, split.word, n) if split.word in single.key_to_index else []
    near = {s["label"]: [w for w, _ in s["neighbours"]] for s in senses}
    return {"occurrences": len(split.positions), "clustered": clustering.clustered,
            "no_context": split.no_context, "k": clustering.k,
            "k_chosen_by": clustering.chosen_by,
            "silhouette": {str(k): v for k, v in clustering.silhouette.items()},
            "too_rare": {str(k): list(sizes) for k, sizes in clustering.too_rare.items()},
            "min_sense_size": clustering.min_size,
            "single_neighbours": single_near, "senses": senses,
            "pca": projection(retrained, near)}
