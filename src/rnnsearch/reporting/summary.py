"""The headline numbers, one small JSON file per row of ``dvc metrics show``: ``dvc.yaml``
declares only ``metrics/summary/<name>.json`` (per grid cell, and the LM) as metrics, as DVC's
table has every metrics file's keys as columns (the full metrics: 22,000 characters wide)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnsearch.data.textio import atomic_dir, write_json
from rnnsearch.reporting.inputs import ReportInputs

SUMMARY = "summary"


def _bleu(system: dict[str, Any], subset: str) -> float | None:
    return system.get(subset, {}).get("bleu")


def cell_summary(inputs: ReportInputs, cell: str, method: str) -> dict[str, float]:
    """A cell's test BLEU (all / no UNK), chrF and p against its baseline (all / no UNK;
    ``method``'s decoding), and its dev perplexity; keys whose number is missing are left out."""
    system = inputs.evals[cell]["systems"].get(method, {})
    vs = system.get("vs_baseline") or {}
    row = {"bleu": _bleu(system, "all"), "bleu_no_unk": _bleu(system, "no_unk"),
           "chrf": system.get("all", {}).get("chrf"),
           "p_vs_baseline": vs.get("all", {}).get("p_value"),
           "p_vs_baseline_no_unk": vs.get("no_unk", {}).get("p_value"),
           "dev_ppl": inputs.train.get(cell, {}).get("val_ppl")}
    return {key: value for key, value in row.items() if value is not None}


def lm_summary(lm: dict[str, Any]) -> dict[str, float]:
    """The language model's dev and test perplexity."""
    return {"dev_ppl": lm["dev"]["perplexity"], "test_ppl": lm["test"]["perplexity"]}


def summaries(inputs: ReportInputs, method: str) -> dict[str, dict[str, float]]:
    """``{file name: headline numbers}`` for every evaluated cell and the language model."""
    rows = {cell: cell_summary(inputs, cell, method) for cell in inputs.ordered_cells()}
    if inputs.lm is not None and "dev" in inputs.lm:
        rows["lm"] = lm_summary(inputs.lm)
    return rows


def write_summaries(inputs: ReportInputs, method: str, metrics: Path) -> Path:
    """Replace ``<metrics>/summary/`` with :func:`summaries` (atomically); returns the folder."""
    folder = metrics / SUMMARY
    with atomic_dir(folder) as tmp:
        for name, row in summaries(inputs, method).items():
            write_json(tmp / f"{name}.json", row)
    return folder
