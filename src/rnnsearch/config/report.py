"""The ``report`` section of params.yaml."""
from __future__ import annotations

from dataclasses import dataclass

from rnnsearch.config.base import check_positive, require
from rnnsearch.config.methods import system_names


@dataclass(frozen=True)
class ReportConfig:
    """What the report shows."""

    method: str = "beam"              # decoding system of Figure 2 and the variants table
    alignment_sentences: int = 3      # sentences per attention model in Figure 3

    def check(self, key: str) -> None:
        require(self.method in system_names(), f"{key}.method",
                f"must be one of {list(system_names())}, got {self.method!r}")
        check_positive(self, key, "alignment_sentences")
