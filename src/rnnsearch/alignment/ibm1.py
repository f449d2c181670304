"""IBM Model 1 by EM, vectorised over the whole corpus, with a NULL source word; and fast_align's
diagonal-preferring reparameterisation (Dyer et al. 2013) as a second model::

    p(f, a | e) = prod_j  p(a_j | j, l, m) * t(f_j | e_{a_j})
    IBM-1:       p(a_j = i) = 1 / (l + 1)
    fast_align:  p(a_j = 0) = p0;  p(a_j = i) = (1 - p0) exp(-lam |i/l - j/m|) / Z_j   (i >= 1)

The prior is fixed, so each iteration is an exact EM step; a Dirichlet ``alpha`` (fast_align's
``-v``, :func:`normalise`) stops rare source words "garbage collecting" (the curve is then no
likelihood). Sentences grouped by source length are matrices of parameter ids (a row per target
token, NULL first): an iteration is a gather, a row sum and one ``bincount``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.special import digamma
from tqdm import tqdm

NULL = "<null>"


@dataclass(frozen=True)
class DiagonalPrior:
    """fast_align's alignment distribution: NULL probability and diagonal tension."""

    p_null: float = 0.08
    tension: float = 4.0


@dataclass
class LengthGroup:
    """Every target token of the sentences whose source has ``length`` words."""

    length: int
    params: np.ndarray          # tokens x (length + 1): parameter ids, column 0 = NULL
    sentence: np.ndarray        # tokens: sentence index
    position: np.ndarray        # tokens: 0-based target position j
    prior: np.ndarray | None    # tokens x (length + 1): p(a_j = i), None = uniform (IBM-1)


@dataclass
class Model1:
    """A trained model: ``t(f | e)`` per co-occurring pair and the EM history."""

    src_words: list[str]                      # id -> word, id 0 = NULL
    tgt_words: list[str]
    pair_src: np.ndarray                      # params: source word id
    pair_tgt: np.ndarray                      # params: target word id
    t: np.ndarray                             # params: t(f | e)
    log_likelihood: list[float] = field(default_factory=list)   # per target token, after k steps

    def table(self) -> dict[tuple[str, str], float]:
        """``{(e, f): t(f | e)}`` (meant for small corpora and tests)."""
        return {(self.src_words[e], self.tgt_words[f]): float(p)
                for e, f, p in zip(self.pair_src, self.pair_tgt, self.t)}


def encode(sentences: Sequence[Sequence[str]], null: bool) -> tuple[list[np.ndarray], list[str]]:
    """Sentences as id arrays and the id -> word list (id 0 = NULL when ``null``)."""
    ids: dict[str, int] = {NULL: 0} if null else {}
    encoded = [np.fromiter((ids.setdefault(w, len(ids)) for w in s), dtype=np.int64, count=len(s))
               for s in sentences]
    return encoded, list(ids)


def diagonal_prior(length: int, position: np.ndarray, tgt_len: np.ndarray,
                   prior: DiagonalPrior) -> np.ndarray:
    """tokens x (length + 1) alignment probabilities of fast_align (column 0 = NULL)."""
    i = np.arange(1, length + 1) / length                                  # length
    j = (position + 1) / tgt_len                                           # tokens
    weight = np.exp(-prior.tension * np.abs(i[None, :] - j[:, None]))     # tokens x length
    weight *= (1.0 - prior.p_null) / weight.sum(1, keepdims=True)
    return np.concatenate([np.full((len(position), 1), prior.p_null), weight], 1)


def build_groups(src: list[np.ndarray], tgt: list[np.ndarray], n_tgt: int,
                 prior: DiagonalPrior | None) -> tuple[list[LengthGroup], np.ndarray]:
    """Length groups with pair keys ``e * n_tgt + f`` in ``params`` (made ids later), and the
    sorted unique keys."""
    lengths = np.array([len(s) for s in src])
    groups = []
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        rows = rows[[len(tgt[r]) > 0 for r in rows]]
        if len(rows) == 0 or length == 0:
            continue
        tgt_len = np.array([len(tgt[r]) for r in rows])
        sentence = np.repeat(rows, tgt_len)                                # tokens
        starts = np.repeat(np.cumsum(tgt_len) - tgt_len, tgt_len)
        position = np.arange(len(sentence)) - starts
        words = np.concatenate([tgt[r] for r in rows])                    # tokens
        sources = np.stack([src[r] for r in rows])[np.repeat(np.arange(len(rows)), tgt_len)]
        candidates = np.concatenate([np.zeros((len(words), 1), np.int64), sources], 1)
        keys = candidates * n_tgt + words[:, None]                        # tokens x (l + 1)
        token_len = np.repeat(tgt_len, tgt_len)
        groups.append(LengthGroup(int(length), keys, sentence, position,
                                  None if prior is None else
                                  diagonal_prior(int(length), position, token_len, prior)))
    unique, ids = dense_ids(np.concatenate([g.params.ravel() for g in groups]))
    start = 0
    for g in groups:
        g.params = ids[start:start + g.params.size].reshape(g.params.shape)
        start += g.params.size
    return groups, unique


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct non-negative ``keys`` and each key's index among them, by one ``np.sort``
    of ``key << b | position`` where it fits 63 bits (``argsort`` is several times slower)."""
    shift = max(int(len(keys) - 1).bit_length(), 1)
    if int(keys.max(initial=0)).bit_length() + shift <= 63:
        packed = np.sort((keys << shift) | np.arange(len(keys), dtype=np.int64))
        order, ordered = packed & ((1 << shift) - 1), packed >> shift
    else:
        order = np.argsort(keys)
        ordered = keys[order]
    first = np.empty(len(keys), bool)
    first[:1], first[1:] = True, ordered[1:] != ordered[:-1]
    ids = np.empty(len(keys), np.int32)
    ids[order] = np.cumsum(first) - 1
    return ordered[first], ids


def link_probabilities(group: LengthGroup, t: np.ndarray) -> np.ndarray:
    """tokens x (l + 1): ``p(a_j = i) t(f_j | e_i)`` (IBM-1's uniform prior included)."""
    prob = t[group.params]
    if group.prior is None:
        return prob / (group.length + 1)
    return prob * group.prior


def expected_counts(groups: list[LengthGroup], t: np.ndarray, ids: np.ndarray,
                    posts: np.ndarray) -> tuple[np.ndarray, float, int]:
    """E-step: expected link counts per parameter, total log-likelihood, target tokens. ``ids``:
    every group's ``params`` flattened in order; ``posts``: a same-size reused posterior buffer."""
    log_likelihood, tokens, start = 0.0, 0, 0
    for group in groups:
        prob = link_probabilities(group, t)                                # tokens x (l + 1)
        z = prob.sum(1, keepdims=True)                                     # tokens x 1
        log_likelihood += float(np.log(z).sum())
        tokens += len(z)
        np.divide(prob, z, out=posts[start:start + prob.size].reshape(prob.shape))
        start += prob.size
    return np.bincount(ids, posts, minlength=len(t)), log_likelihood, tokens


def normalise(counts: np.ndarray, pair_src: np.ndarray, n_src: int,
              alpha: float | None = None) -> np.ndarray:
    """M-step: ``t(f | e) = c(e, f) / sum_f c(e, f)``; with a Dirichlet prior ``alpha`` the
    variational-Bayes update ``exp(digamma(c(e, f) + alpha) - digamma(sum_f (c(e, f) + alpha)))``
    (``f`` over the target words co-occurring with ``e``)."""
    if alpha is not None:
        totals = np.bincount(pair_src, counts + alpha, minlength=n_src)
        return np.exp(digamma(counts + alpha) - digamma(totals)[pair_src])
    totals = np.bincount(pair_src, counts, minlength=n_src)
    return counts / np.where(totals > 0, totals, 1.0)[pair_src]


def train_model1(src_sentences: Sequence[Sequence[str]], tgt_sentences: Sequence[Sequence[str]],
                 iterations: int, prior: DiagonalPrior | None = None, desc: str = "EM",
                 progress: bool = True, alpha: float | None = None
                 ) -> tuple[Model1, list[LengthGroup]]:
    """EM for ``t(f | e)``, ``src`` (with NULL) to ``tgt``: the model and its groups (for
    :func:`viterbi`). ``log_likelihood[k]``: mean log p(f | e) per target token after k steps (k =
    0: the co-occurrence initialisation, one step from uniform t). ``alpha``: variational Bayes'
    Dirichlet prior on every M-step, the first included (None: plain EM)."""
    src, src_words = encode(src_sentences, null=True)
    tgt, tgt_words = encode(tgt_sentences, null=False)
    groups, keys = build_groups(src, tgt, max(len(tgt_words), 1), prior)
    pair_src, pair_tgt = keys // max(len(tgt_words), 1), keys % max(len(tgt_words), 1)
    t = np.ones(len(keys))
    model = Model1(src_words, tgt_words, pair_src, pair_tgt, t)
    ids = np.concatenate([g.params.ravel() for g in groups])
    posts = np.empty(len(ids))
    for step in tqdm(range(iterations + 2), desc=desc, unit="iteration", disable=not progress):
        counts, log_likelihood, tokens = expected_counts(groups, model.t, ids, posts)
        if step > 0:
            model.log_likelihood.append(log_likelihood / max(tokens, 1))
        if step <= iterations:
            model.t = normalise(counts, pair_src, len(src_words), alpha)
    return model, groups


def viterbi(model: Model1, groups: list[LengthGroup], sentences: int) -> list[list[int]]:
    """The most probable source position of each target word (-1: NULL) of the first
    ``sentences`` sentences of the training corpus."""
    best: list[dict[int, int]] = [{} for _ in range(sentences)]
    for group in groups:
        keep = group.sentence < sentences
        if not keep.any():
            continue
        choice = link_probabilities(group, model.t)[keep].argmax(1) - 1    # kept tokens
        for s, j, i in zip(group.sentence[keep], group.position[keep], choice):
            best[s][int(j)] = int(i)
    return [[row[j] for j in range(len(row))] for row in best]
