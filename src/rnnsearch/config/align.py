"""The ``align`` section of params.yaml: EM word aligners and alignment quality (AER)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

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
    train_links: str | None = None          # "<model>/<symmetrisation>" written for every
                                            # training pair (supervised attention); null: none

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
        self._check_train_links(key)

    def _check_train_links(self, key: str) -> None:
        """``train_links``: an aligner of ``models`` and a symmetrisation of ``symmetrize``, and
        every training pair aligned (no ``max_pairs`` sample)."""
        if self.train_links is None:
            return
        model, _, links = self.train_links.partition("/")
        require(model in self.models and links in self.symmetrize, f"{key}.train_links",
                f"must be '<model>/<symmetrisation>' with a model of {key}.models "
                f"({', '.join(self.models)}) and a symmetrisation of {key}.symmetrize "
                f"({', '.join(self.symmetrize)}), e.g. 'fast_align_vb/grow-diag-final-and'; "
                f"got {self.train_links!r}")
        require(self.max_pairs == 0, f"{key}.train_links",
                f"links every training pair, but {key}.max_pairs ({self.max_pairs}) gives EM only "
                f"a sample of them; set {key}.max_pairs: 0 or {key}.train_links: null")

    def check_params(self, key: str, params: dict[str, Any]) -> None:
        """``train_links`` are word links: refused with subword units (``tokenize.units``)."""
        units = (params.get("tokenize") or {}).get("units", "word")
        require(self.train_links is None or units == "word", f"{key}.train_links",
                f"links Moses words, but tokenize.units is {units!r} (the models read subword "
                f"pieces); supervised attention needs tokenize.units: word, or set "
                f"{key}.train_links: null")

    @property
    def train_links_choice(self) -> tuple[str, str] | None:
        """``(aligner, symmetrisation)`` of ``train_links``, or None."""
        if self.train_links is None:
            return None
        model, _, links = self.train_links.partition("/")
        return model, links
