"""The ``align`` section of params.yaml: EM word aligners and alignment quality (AER)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rnnsearch.config.base import check_non_negative, check_positive, require

Aligner = Literal["ibm1", "fast_align", "fast_align_vb"]
Symmetrisation = Literal["intersection", "union", "grow-diag-final", "grow-diag-final-and"]


@dataclass(frozen=True)
class AlignConfig:
    """IBM Model 1 / fast_align by EM (both directions, symmetrised) and attention as alignment,
    scored against the human links of the 447 Hansard gold sentences. ``fast_align_vb``:
    fast_align with a Dirichlet prior ``alpha`` on the translation table (its ``-v``)."""

    models: tuple[Aligner, ...] = ("ibm1", "fast_align", "fast_align_vb")
    iterations: int = 5
    p_null: float = 0.08
    tension: float = 4.0
    alpha: float = 0.01                     # fast_align_vb: Dirichlet prior of variational Bayes
    max_pairs: int = 0
    symmetrize: tuple[Symmetrisation, ...] = ("intersection", "union", "grow-diag-final",
                                              "grow-diag-final-and")
    attention_threshold: float = 0.3
    figure_sentence: str | None = "109"     # gold sentence id drawn in the overlay (null: none)
    batch_size: int = 32

    def check(self, key: str) -> None:
        require(len(self.models) > 0, f"{key}.models",
                "name at least one aligner (ibm1, fast_align, fast_align_vb)")
        require(len(set(self.models)) == len(self.models), f"{key}.models", "lists an aligner twice")
        check_positive(self, key, "iterations", "batch_size")
        check_non_negative(self, key, "max_pairs", "tension")
        require(0.0 < self.p_null < 1.0, f"{key}.p_null", f"must be in (0, 1), got {self.p_null}")
        require(0.0 < self.alpha < math.inf, f"{key}.alpha",
                f"must be a finite number > 0 (fast_align_vb's Dirichlet prior), got {self.alpha}")
        require(self.figure_sentence is None or bool(self.figure_sentence.strip()),
                f"{key}.figure_sentence", "must be a gold sentence id such as '109', or null")
        require(0.0 < self.attention_threshold <= 1.0, f"{key}.attention_threshold",
                f"must be in (0, 1], got {self.attention_threshold}")
