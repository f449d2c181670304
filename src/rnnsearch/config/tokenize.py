"""The ``tokenize`` section of params.yaml."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rnnsearch.config.base import check_positive, check_seed, require
from rnnsearch.data.vocab import SPECIALS

Units = Literal["word", "bpe", "unigram"]


@dataclass(frozen=True)
class SubwordConfig:
    """How the SentencePiece models of ``units: bpe | unigram`` are learnt."""

    joint: bool = False                 # one model on both sides (Sennrich et al.'s BPE-J)
    character_coverage: float = 1.0     # share of training characters the alphabet covers
    seed: int = 1

    def check(self, key: str) -> None:
        require(0 < self.character_coverage <= 1, f"{key}.character_coverage",
                f"must be in (0, 1], got {self.character_coverage}")
        check_seed(self, key, "seed")


@dataclass(frozen=True)
class TokenizeConfig:
    """Moses tokenisation, the units the models read (Moses words or their subword pieces) and the
    vocabulary sizes, specials included (words: the N most frequent; subwords: the model's N)."""

    lowercase: bool = False
    units: Units = "word"
    vocab_size_src: int = 10000
    vocab_size_tgt: int = 10000
    min_count: int = 1
    workers: int = 2
    subword: SubwordConfig = field(default_factory=SubwordConfig)

    @property
    def subwords(self) -> bool:
        """Whether the units are SentencePiece pieces rather than Moses words."""
        return self.units != "word"

    def check(self, key: str) -> None:
        check_positive(self, key, "min_count", "workers")
        for name in ("vocab_size_src", "vocab_size_tgt"):
            size = getattr(self, name)
            require(size > len(SPECIALS), f"{key}.{name}",
                    f"must be > {len(SPECIALS)} (the special tokens), got {size}")
        if self.subwords and self.subword.joint:
            require(self.vocab_size_tgt == self.vocab_size_src, f"{key}.vocab_size_tgt",
                    f"a joint model ({key}.subword.joint) has one vocabulary: must equal "
                    f"vocab_size_src ({self.vocab_size_src}), got {self.vocab_size_tgt}")
