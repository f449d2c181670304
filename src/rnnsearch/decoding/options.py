"""Search options and the small pure helpers every decoder shares.

* :class:`SearchOptions`: beam width, length normalisation, n-best and the output length limit;
  it is the ``translate.search`` section of params.yaml, so it lives (and is validated) in
  :mod:`rnnsearch.config.translate`; decoders import it from here.
* :func:`max_output_lengths`: ``min(cap, floor(a * src_len + b))`` per sentence, at least 1.
* :func:`normalise`: the score finished hypotheses are ranked by.
"""
from __future__ import annotations

import math

import torch

from rnnsearch.config.search import SearchOptions

__all__ = ["SearchOptions", "max_output_lengths", "normalise"]


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
