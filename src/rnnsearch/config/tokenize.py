"""The ``tokenize`` section of params.yaml."""
from __future__ import annotations

from dataclasses import dataclass

from rnnsearch.config.base import check_positive, require
from rnnsearch.data.vocab import SPECIALS


@dataclass(frozen=True)
class TokenizeConfig:
    """Moses tokenisation and vocabulary sizes."""

    lowercase: bool = False
    vocab_size_src: int = 10000
    vocab_size_tgt: int = 10000
    min_count: int = 1
    workers: int = 2

    def check(self, key: str) -> None:
        check_positive(self, key, "min_count", "workers")
        for name in ("vocab_size_src", "vocab_size_tgt"):
            size = getattr(self, name)
            require(size > len(SPECIALS), f"{key}.{name}",
                    f"must be > {len(SPECIALS)} (the special tokens), got {size}")
