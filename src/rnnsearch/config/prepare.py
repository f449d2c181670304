"""The ``prepare`` section of params.yaml."""
from __future__ import annotations

from dataclasses import dataclass, field

from rnnsearch.config.base import check_non_negative, check_positive, check_seed, require
from rnnsearch.data.corpora import REGISTRY


@dataclass(frozen=True)
class CleanConfig:
    """clean-corpus-n bounds (words)."""

    min_len: int = 1
    max_len: int = 80
    max_ratio: float = 9.0

    def check(self, key: str) -> None:
        check_positive(self, key, "min_len", "max_len", "max_ratio")
        require(self.max_len >= self.min_len, f"{key}.max_len",
                f"must be >= min_len ({self.min_len}), got {self.max_len}")
        require(self.max_ratio >= 1, f"{key}.max_ratio", f"must be >= 1, got {self.max_ratio}")


@dataclass(frozen=True)
class SplitSizes:
    """Pairs to sample per split (0 keeps all)."""

    train: int = 0
    dev: int = 1000
    test: int = 1000

    def check(self, key: str) -> None:
        check_non_negative(self, key, "train", "dev", "test")


@dataclass(frozen=True)
class PrepareConfig:
    """Which corpus and direction, where to find it, how to clean and sample it."""

    corpus: str
    src_lang: str
    tgt_lang: str
    mirror: str | None = "../shared/corpora"
    download: bool = True
    cache_dir: str = ".cache/corpora"
    clean: CleanConfig = field(default_factory=CleanConfig)
    sizes: SplitSizes = field(default_factory=SplitSizes)
    test_buckets: tuple[int, ...] = ()
    test_per_bucket: int = 0
    seed: int = 1234

    def check(self, key: str) -> None:
        require(self.corpus in REGISTRY, f"{key}.corpus",
                f"unknown corpus '{self.corpus}' (known: {', '.join(sorted(REGISTRY))})")
        languages = REGISTRY[self.corpus].languages
        for name in ("src_lang", "tgt_lang"):
            lang = getattr(self, name)
            require(lang in languages, f"{key}.{name}",
                    f"corpus '{self.corpus}' has no language '{lang}' (it has: {', '.join(languages)})")
        require(self.src_lang != self.tgt_lang, f"{key}.tgt_lang", "must differ from src_lang")
        edges = self.test_buckets
        require(all(e > 0 for e in edges) and list(edges) == sorted(set(edges)),
                f"{key}.test_buckets", f"must be increasing positive lengths, got {list(edges)}")
        check_non_negative(self, key, "test_per_bucket")
        require(not edges or self.test_per_bucket > 0, f"{key}.test_per_bucket",
                "must be > 0 when test_buckets is set")
        check_seed(self, key, "seed")
