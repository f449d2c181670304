"""How a search runs (``translate.search``): beam width, length penalty, n-best, length limit.

Apart from the ``translate`` section so that training's dev BLEU does not depend on the
decoding methods' registry (a new method retrains no model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rnnsearch.config.base import check_non_negative, check_positive, require

LengthPenalty = Literal["none", "mean", "gnmt"]
Stop = Literal["first_k", "bound"]
STOPS: tuple[str, ...] = ("first_k", "bound")


@dataclass(frozen=True)
class SearchOptions:
    """How to search; lengths count output tokens including the closing ``</s>``."""

    beam_size: int = 5              # k: hypotheses kept per sentence (1 = greedy under
                                    # stop: first_k; under bound it searches on)
    length_penalty: LengthPenalty = "mean"  # how finished hypotheses are compared
    alpha: float = 0.6              # GNMT penalty exponent (length_penalty: gnmt only)
    nbest: int = 1                  # finished hypotheses returned per sentence (<= beam_size)
    max_len_a: float = 1.5          # output length limit: a * source length + b ...
    max_len_b: int = 10
    max_len_cap: int = 250          # ... but never more than this many tokens
    # when a sentence's beam search ends: first_k, once k hypotheses have finished; bound, once
    # no live hypothesis can still beat the nbest-th best finished one under the length penalty
    stop: Stop = "first_k"

    def check(self, key: str) -> None:
        """Validate values; ``key`` is the params key this came from (for messages)."""
        check_positive(self, key, "beam_size", "nbest")
        require(self.max_len_cap >= 2, f"{key}.max_len_cap",
                "must be >= 2 (lengths count the closing </s>, so a cap of 1 leaves no place for "
                f"a word and every translation is empty), got {self.max_len_cap}")
        require(self.stop in STOPS, f"{key}.stop", f"must be one of {list(STOPS)}, got {self.stop!r}")
        check_non_negative(self, key, "alpha", "max_len_a", "max_len_b")
        require(self.nbest <= self.beam_size, f"{key}.nbest",
                f"must be <= beam_size ({self.beam_size}), got {self.nbest}")
        require(self.max_len_b >= 1 or self.max_len_a > 0, f"{key}.max_len_b",
                "max_len_a and max_len_b cannot both be 0 (no output could be produced)")
