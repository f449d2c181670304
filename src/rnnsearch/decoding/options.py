"""Search options and the small pure helpers every decoder shares.

:class:`SearchOptions` is params.yaml's ``translate.search``, validated in
:mod:`rnnsearch.config.search` and re-exported here for the decoders."""
from __future__ import annotations

import math

import torch

from rnnsearch.config.search import SearchOptions

__all__ = ["SearchOptions", "max_output_lengths", "normalise", "reachable"]


def max_output_lengths(src_len: torch.Tensor, options: SearchOptions) -> torch.Tensor:
    """Per-sentence output length limit (tokens, ``</s>`` included): batch -> batch (long)."""
    limit = torch.floor(src_len.double() * options.max_len_a + options.max_len_b).long()
    return limit.clamp(min=1, max=options.max_len_cap)


def normalise(score: float, length: int, options: SearchOptions) -> float:
    """The ranking score of a finished hypothesis of ``length`` tokens (``</s>`` included).
    ``none``: the summed log-probability (favours short outputs); ``mean``: the notes' mean
    log-probability per token; ``gnmt``: Wu et al. 2016, ``score / ((5 + length) / 6) ** alpha``."""
    if options.length_penalty == "none" or length == 0:
        return score
    if options.length_penalty == "mean":
        return score / length
    return score / math.pow((5.0 + length) / 6.0, options.alpha)


def reachable(scores: torch.Tensor, limits: torch.Tensor, options: SearchOptions) -> torch.Tensor:
    """The best normalised score live hypotheses could still finish with: ``scores`` (summed
    log-probabilities, any shape) normalised as if they ended at ``limits`` tokens (broadcast).
    A bound for every penalty: further words only lower a sum <= 0, and such a sum divided by a
    penalty growing with the length is highest at the longest length allowed."""
    if options.length_penalty == "none":
        return scores
    lengths = limits.to(scores.dtype)
    if options.length_penalty == "mean":
        return scores / lengths
    return scores / torch.pow((5.0 + lengths) / 6.0, options.alpha)
