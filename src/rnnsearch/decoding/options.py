"""Search options and the small pure helpers every decoder shares.

* :class:`SearchOptions`: beam width, length normalisation, n-best and the output length limit.
  It is also the ``translate.search`` section of params.yaml (loaded by
  :mod:`rnnsearch.config.translate`), so its ``check`` names the params key of a bad value.
* :func:`max_output_lengths`: ``min(cap, floor(a * src_len + b))`` per sentence, at least 1.
* :func:`normalise`: the score finished hypotheses are ranked by.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from rnnsearch.config.base import check_non_negative, check_positive, require

LengthPenalty = Literal["none", "mean", "gnmt"]


@dataclass(frozen=True)
class SearchOptions:
    """How to search; lengths count output tokens including the closing ``</s>``."""

    beam_size: int = 5              # k: hypotheses kept per sentence (1 = greedy)
    length_penalty: LengthPenalty = "mean"  # how finished hypotheses are compared
    alpha: float = 0.6              # GNMT penalty exponent (length_penalty: gnmt only)
    nbest: int = 1                  # finished hypotheses returned per sentence (<= beam_size)
    max_len_a: float = 1.5          # output length limit: a * source length + b ...
    max_len_b: int = 10
    max_len_cap: int = 250          # ... but never more than this many tokens

    def check(self, key: str) -> None:
        """Validate values; ``key`` is the params key this came from (for messages)."""
        check_positive(self, key, "beam_size", "nbest", "max_len_cap")
        check_non_negative(self, key, "alpha", "max_len_a", "max_len_b")
        require(self.nbest <= self.beam_size, f"{key}.nbest",
                f"must be <= beam_size ({self.beam_size}), got {self.nbest}")
        require(self.max_len_b >= 1 or self.max_len_a > 0, f"{key}.max_len_b",
                "max_len_a and max_len_b cannot both be 0 (no output could be produced)")


def max_output_lengths(src_len: torch.Tensor, options: SearchOptions) -> torch.Tensor:
    """Per-sentence output length limit (tokens, ``</s>`` included): batch -> batch (long)."""
    limit = torch.floor(src_len.double() * options.max_len_a + options.max_len_b).long()
    return limit.clamp(min=1, max=options.max_len_cap)


def normalise(score: float, length: int, options: SearchOptions) -> float:
    """The ranking score of a finished hypothesis of ``length`` tokens (``</s>`` included).

    ``none``: the summed log-probability (favours short outputs); ``mean``: the notes' mean
    log-probability per token; ``gnmt``: Wu et al. 2016, ``score / ((5 + length) / 6) ** alpha``.
    """
    if options.length_penalty == "none" or length == 0:
        return score
    if options.length_penalty == "mean":
        return score / length
    return score / math.pow((5.0 + length) / 6.0, options.alpha)
