"""What the report reads: metrics files only (no model, no translation, no training code)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _read_folder(folder: Path) -> dict[str, dict[str, Any]]:
    """``<name>.json`` files of a folder by name (sorted); empty when the folder is absent."""
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def _only(files: dict[str, dict[str, Any]], cells: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {cell: data for cell, data in files.items() if cell in cells}


def _read_file(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@dataclass(frozen=True)
class ReportInputs:
    """Every metrics file the tables and figures are made from (absent ones empty/None)."""

    evals: dict[str, dict[str, Any]]                      # metrics/eval/<cell>.json
    alignments: dict[str, dict[str, Any]] = field(default_factory=dict)  # metrics/alignments/
    train: dict[str, dict[str, Any]] = field(default_factory=dict)       # metrics/train/<cell>.json
    embed: dict[str, Any] | None = None                   # metrics/embed.json
    lm: dict[str, Any] | None = None                      # metrics/lm.json

    @classmethod
    def load(cls, metrics: Path) -> "ReportInputs":
        """Read ``metrics/``; the cells are those evaluated (``metrics/eval``, the current grid).

        Per-cell files of other cells (``metrics/alignments``, ``metrics/train``) are left out:
        they are what an earlier grid's stages left behind, e.g. the default grid's files in an
        experiment that trains only one cell.
        """
        evals = _read_folder(metrics / "eval")
        return cls(evals=evals,
                   alignments=_only(_read_folder(metrics / "alignments"), evals),
                   train=_only(_read_folder(metrics / "train"), evals),
                   embed=_read_file(metrics / "embed.json"),
                   lm=_read_file(metrics / "lm.json"))

    def ordered_cells(self, baseline: str = "encdec") -> list[str]:
        """Cells by max length, the baseline model first, then by name (the paper's order)."""
        def key(cell: str) -> tuple:
            model = self.evals[cell]["model"]
            return (model.get("max_len") or 0, model.get("name") != baseline, model.get("name"))
        return sorted(self.evals, key=key)
