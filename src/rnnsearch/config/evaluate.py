"""The ``evaluate`` section of params.yaml: scores, subsets and significance tests."""
from __future__ import annotations

from dataclasses import dataclass

from rnnsearch.config.base import check_non_negative, require

BLEU_TOKENIZERS = ("none", "zh", "13a", "intl", "char", "ja-mecab", "ko-mecab", "spm",
                   "flores101", "flores200")


@dataclass(frozen=True)
class EvaluateConfig:
    """sacrebleu BLEU/chrF overall, on the no-UNK subset and by source length."""

    baseline: str = "encdec"                      # grid model the others are tested against
    buckets: tuple[int, ...] = (10, 20, 30, 40, 50, 60)  # bucket upper edges; last is open
    bootstrap_samples: int = 1000                 # paired bootstrap resamples (0: no test)
    bootstrap_seed: int = 12345
    bleu_tokenize: str = "13a"

    def check(self, key: str) -> None:
        require(len(self.buckets) > 0, f"{key}.buckets", "needs at least one edge")
        require(all(b > 0 for b in self.buckets), f"{key}.buckets", "edges must be > 0")
        require(list(self.buckets) == sorted(set(self.buckets)), f"{key}.buckets",
                f"edges must be strictly increasing, got {list(self.buckets)}")
        check_non_negative(self, key, "bootstrap_samples")
        require(self.bleu_tokenize in BLEU_TOKENIZERS, f"{key}.bleu_tokenize",
                f"must be one of {list(BLEU_TOKENIZERS)}, got {self.bleu_tokenize!r}")
