"""The ``embed`` section of params.yaml: gensim word2vec, one model per language."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rnnsearch.config.base import check_positive, check_seed, require


@dataclass(frozen=True)
class ProbeWords:
    """Probe words per language code, for the nearest-neighbour table (absent words are skipped)."""

    en: tuple[str, ...] = ("man", "dog", "red", "water", "playing", "bank")
    fr: tuple[str, ...] = ("homme", "chien", "rouge", "eau", "joue", "banque")
    de: tuple[str, ...] = ("mann", "hund", "rot", "wasser", "spielt", "bank")


@dataclass(frozen=True)
class EmbedConfig:
    """Word2vec hyperparameters (spec section 2) and what the evaluation shows."""

    sg: Literal["cbow", "skipgram"] = "skipgram"
    vector_size: int = 256
    window: int = 5
    negative: int = 5
    ns_exponent: float = 0.75
    min_count: int = 2
    epochs: int = 10
    workers: int = 1
    seed: int = 1234
    neighbours: int = 8
    plot_words: int = 300
    probes: ProbeWords = field(default_factory=ProbeWords)

    def check(self, key: str) -> None:
        check_positive(self, key, "vector_size", "window", "negative", "min_count", "epochs",
                       "workers", "neighbours", "plot_words")
        require(self.plot_words >= 2, f"{key}.plot_words", "must be >= 2 (a 2-D projection)")
        check_seed(self, key, "seed")

    @property
    def sg_flag(self) -> int:
        """gensim's ``sg``: 1 for skip-gram, 0 for CBOW."""
        return int(self.sg == "skipgram")
