"""Unigram F1 by the word's frequency in the training target text (Sennrich, Haddow & Birch
2016, Table 2 and Figures 2-3): how well frequent, rare and unseen words are translated.

Words are Moses tokens (:func:`unit_words`); matches clipped per sentence as in BLEU; a group's
F1 = 2 matched / (hyp + ref tokens), in percent. Groups by training rank (ties alphabetical):
``in_vocabulary`` (what a word-level model of N entries can emit), ``rare``, ``unseen`` (with a
hypothesis' ``<unk>``, never matching), ``all``; the curve's bins (:func:`rank_edges`), unseen."""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from rnnsearch.data.subword import pieces_to_words
from rnnsearch.data.vocab import SPECIALS, Vocabulary

CLASSES = ("all", "in_vocabulary", "rare", "unseen")
UNSEEN = "unseen"
RANK_STEPS = (1, 2, 5)          # bin edges 10, 20, 50, 100, 200, 500, ...
MERGE_BELOW = 1.5               # a last bin ending below 1.5 x its lower edge joins the one before
UNSEEN_STEP = 2                 # the unseen point's step: this many times the training types


def unit_words(line: str, subwords: bool) -> list[str]:
    """The Moses tokens of one tokenised line: its tokens, or its pieces joined back."""
    return pieces_to_words(line.split()) if subwords else line.split()


def rank_edges(types: int) -> list[int]:
    """Upper edges of the rank bins: 10, 20, 50, 100, ... below ``types``, then ``types``; a last
    bin under half as wide as its edge joins the one before (no near-coincident log-axis points)."""
    edges: list[int] = []
    scale = 10
    while types > 0:
        for step in RANK_STEPS:
            if step * scale >= types:
                if edges and types < edges[-1] * MERGE_BELOW:
                    edges.pop()
                return [*edges, types]
            edges.append(step * scale)
        scale *= 10
    return edges


@dataclass(frozen=True)
class TrainingWords:
    """The training target words: each word's frequency rank (1 = most frequent), and how many
    of the first ranks form the word-level vocabulary."""

    ranks: Mapping[str, int]
    vocabulary_words: int
    tokens: int

    @classmethod
    def count(cls, sentences: Iterable[Sequence[str]], vocab_size: int, min_count: int
              ) -> "TrainingWords":
        """Rank the words of ``sentences``; the vocabulary is the one
        :meth:`Vocabulary.build` makes of them with ``vocab_size`` entries and ``min_count``."""
        counts: Counter = Counter()
        for words in sentences:
            counts.update(words)
        ranked = sorted((w for w in counts if w not in SPECIALS), key=lambda w: (-counts[w], w))
        vocabulary = Vocabulary.build(counts, vocab_size, min_count)
        return cls({word: rank for rank, word in enumerate(ranked, 1)},
                   len(vocabulary) - len(SPECIALS), sum(counts.values()))

    @property
    def types(self) -> int:
        """How many distinct words the training text holds."""
        return len(self.ranks)

    def word_class(self, word: str) -> str:
        """``in_vocabulary``, ``rare`` or ``unseen`` (see the module's docstring)."""
        rank = self.ranks.get(word)
        if rank is None:
            return UNSEEN
        return "in_vocabulary" if rank <= self.vocabulary_words else "rare"

    def summary(self) -> dict[str, int]:
        """What the classes were made of: training tokens and word types, vocabulary words."""
        return {"training_tokens": self.tokens, "training_types": self.types,
                "vocabulary_words": self.vocabulary_words}


@dataclass(frozen=True)
class RankBins:
    """The curve's groups: a word's rank bin (``lo-hi``) or ``unseen``; ``steps``: x values (the
    highest rank; ``unseen``: twice the number of types, one step further on a log axis)."""

    edges: tuple[int, ...]
    labels: tuple[str, ...]
    steps: tuple[int, ...]
    training: TrainingWords

    @classmethod
    def of(cls, training: TrainingWords) -> "RankBins":
        """The bins of :func:`rank_edges` over ``training``'s ranks, ``unseen`` last."""
        edges = tuple(rank_edges(training.types))
        labels = [f"{lo + 1}-{hi}" for lo, hi in zip((0, *edges[:-1]), edges)]
        return cls(edges, (*labels, UNSEEN), (*edges, UNSEEN_STEP * training.types), training)

    def label(self, word: str) -> str:
        """The bin of ``word``."""
        rank = self.training.ranks.get(word)
        if rank is None:
            return UNSEEN
        return self.labels[bisect.bisect_left(self.edges, rank)]


def tally(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]],
          group: Callable[[str], str]) -> dict[str, Counter]:
    """Per group: ``hyp`` and ``ref`` tokens and ``matched`` (clipped per sentence) ones."""
    totals: dict[str, Counter] = {}
    for hyp, ref in zip(hyps, refs):
        hyp_counts, ref_counts = Counter(hyp), Counter(ref)
        for kind, counts in (("hyp", hyp_counts), ("ref", ref_counts),
                             ("matched", hyp_counts & ref_counts)):
            for word, n in counts.items():
                totals.setdefault(group(word), Counter())[kind] += n
    return totals


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def f1_row(counts: Counter) -> dict[str, Any]:
    """F1, precision and recall (percent; None without tokens) and the token counts."""
    hyp, ref, matched = counts["hyp"], counts["ref"], counts["matched"]
    return {"f1": _percent(2 * matched, hyp + ref), "precision": _percent(matched, hyp),
            "recall": _percent(matched, ref), "hyp_tokens": hyp, "ref_tokens": ref,
            "matched": matched}


def unigram_f1(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]],
               training: TrainingWords) -> dict[str, Any]:
    """The rows of every class (:data:`CLASSES`) and ``by_rank``: one row per rank bin, with
    its ``step``, in rank order."""
    by_class = tally(hyps, refs, training.word_class)
    by_class["all"] = sum(by_class.values(), Counter())
    bins = RankBins.of(training)
    by_bin = tally(hyps, refs, bins.label)
    return {**{name: f1_row(by_class.get(name, Counter())) for name in CLASSES},
            "by_rank": {label: {**f1_row(by_bin.get(label, Counter())), "step": step}
                        for label, step in zip(bins.labels, bins.steps)}}
