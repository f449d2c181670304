"""The ``senses`` section of params.yaml: split ambiguous words into sense vectors.

Each occurrence of a listed word is described by the mean of its context words' vectors; the
occurrences are clustered with k-means (k fixed, or chosen by silhouette), relabelled
``word_1`` ... ``word_k`` and word2vec is retrained with the ``embed`` section's settings."""
from __future__ import annotations

from dataclasses import dataclass, field

from rnnsearch.config.base import check_non_negative, check_positive, check_seed, require


@dataclass(frozen=True)
class SenseWords:
    """Ambiguous words per language code, matched case-sensitively against the tokens (the
    vocabulary keeps case unless ``tokenize.lowercase``); rare or absent words are skipped."""

    en: tuple[str, ...] = ("order", "interest", "party", "house", "bill", "bank")
    fr: tuple[str, ...] = ("ordre", "intérêt", "parti")
    de: tuple[str, ...] = ("Bank", "Decke", "Schlange", "Tor")


@dataclass(frozen=True)
class SensesConfig:
    """How occurrences are described, clustered and reported."""

    words: SenseWords = field(default_factory=SenseWords)
    k: int = 0
    max_k: int = 4
    window: int = 5
    min_occurrences: int = 50
    max_occurrences_clustered: int = 2000
    neighbours: int = 8
    context_words: int = 6
    seed: int = 1234

    def check(self, key: str) -> None:
        check_non_negative(self, key, "k")
        require(self.k != 1, f"{key}.k", "must be 0 (choose by silhouette) or >= 2, got 1")
        require(self.max_k >= 2, f"{key}.max_k", f"must be >= 2, got {self.max_k}")
        check_positive(self, key, "window", "neighbours", "context_words")
        clusters = max(self.k, self.max_k)
        require(self.min_occurrences > clusters, f"{key}.min_occurrences",
                f"must exceed the number of clusters ({clusters}), got {self.min_occurrences}")
        require(self.max_occurrences_clustered >= self.min_occurrences,
                f"{key}.max_occurrences_clustered",
                f"must be >= min_occurrences ({self.min_occurrences}), "
                f"got {self.max_occurrences_clustered}")
        check_seed(self, key, "seed")

    @property
    def candidate_ks(self) -> tuple[int, ...]:
        """The numbers of senses tried: ``(k,)`` when fixed, else ``2 .. max_k``."""
        return (self.k,) if self.k else tuple(range(2, self.max_k + 1))
