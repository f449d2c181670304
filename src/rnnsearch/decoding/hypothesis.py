"""What a decoder returns for one source sentence."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Hypothesis:
    """One output sequence: ``tokens``, target ids, always end with ``</s>`` (forced at the
    length limit); ``attention`` is ``len(tokens) x src_len`` (real positions), or ``None``."""

    tokens: tuple[int, ...]
    score: float                 # summed log-probability, </s> included
    norm_score: float            # the length-normalised score hypotheses are ranked by
    attention: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Translation:
    """The n-best list for one sentence, best first."""

    hypotheses: tuple[Hypothesis, ...]

    @property
    def best(self) -> Hypothesis:
        """The highest-ranked hypothesis."""
        return self.hypotheses[0]
