"""Table 1 and Figure 2 of a run with replicates (``replicates.seeds``): each system's mean and
sample standard deviation over its seeds (n), the per-seed values, and the replicate-aware
p-values beside the one-run paired bootstrap's (``metrics/eval/replicates/summary.json``)."""
from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from rnnsearch.reporting.figures import bleu_by_length_figure, length_curve
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.paper import display_name
from rnnsearch.reporting.tables import Table, bucket_words, fmt

COLUMNS = (("greedy", "all"), ("greedy", "no_unk"), ("beam", "all"), ("beam", "no_unk"),
           ("beam_unk", "all"))
HEADER = ("Greedy All", "Greedy No UNK", "Beam All", "Beam No UNK", "Beam+UNK repl. All")
SEEDS_FILE = "table1_seeds"


def mean_sd(spread: dict[str, Any] | None) -> str:
    """``12.19 ± 0.31``; the mean alone with one value; ``-`` without one."""
    if spread is None or spread["mean"] is None:
        return fmt(None)
    return fmt(spread["mean"]) + (f" ± {fmt(spread['sd'])}" if spread["sd"] is not None else "")


def _spread(system: dict[str, Any], method: str, subset: str) -> dict[str, Any] | None:
    return system["methods"].get(method, {}).get(subset)


def _p(test: dict[str, Any] | None, subset: str) -> str:
    return fmt((test or {}).get(subset, {}).get("p_value"), 3)


def _name(inputs: ReportInputs, cell: str) -> str:
    model = inputs.evals[cell]["model"]
    return display_name(model["name"], model.get("max_len"))


def table1(inputs: ReportInputs, method: str = "beam") -> Table:
    """Table 1 over replicates: BLEU mean ± sd over each system's n seeds, and p against the
    baseline by the first replicates' paired bootstrap and by the replicate-aware one."""
    summary = inputs.replicates or {}
    rows = []
    for cell in inputs.ordered_cells():
        system = summary["systems"][cell]
        one_run = inputs.evals[cell]["systems"].get(method, {}).get("vs_baseline")
        seeded = system["methods"].get(method, {}).get("vs_baseline")
        rows.append((_name(inputs, cell), str(len(system["cells"])),
                     *(mean_sd(_spread(system, *column)) for column in COLUMNS),
                     _p(one_run, "all"), _p(seeded, "all"), _p(one_run, "no_unk"),
                     _p(seeded, "no_unk")))
    columns = ("Model", "n", *HEADER, "p All, one run", "p All, replicates",
               "p No UNK, one run", "p No UNK, replicates")
    notes = (f"BLEU: mean ± sample standard deviation over each system's n replicates (seeds "
             f"{', '.join(str(s) for s in summary.get('seeds', []))}; train.seed's run is the "
             f"first); each seed's scores: the per-seed table (results/{SEEDS_FILE}.md).",
             f"p ({method} against the no-attention model of the same maximum length): the "
             "paired bootstrap of the first replicates (one run each), and the replicate-aware "
             "bootstrap, which resamples the seeds with the sentences (Clark et al. 2011; "
             "docs/findings.md). Where they disagree, the seed decides.")
    return Table("Table 1: BLEU on the test set over replicates (mean ± sd)", columns,
                 tuple(rows), notes)


def seeds_table(inputs: ReportInputs) -> Table:
    """Every replicate's own Table 1 scores, one row per system and seed."""
    summary = inputs.replicates or {}
    rows = []
    for cell in inputs.ordered_cells():
        system = summary["systems"][cell]
        values = [(_spread(system, *column) or {}).get("values", []) for column in COLUMNS]
        for index, seed in enumerate(summary["seeds"]):
            rows.append((_name(inputs, cell), str(seed), system["cells"][index],
                         *(fmt(row[index] if index < len(row) else None) for row in values)))
    return Table("Table 1 per seed: each replicate's BLEU", ("Model", "Seed", "Cell", *HEADER),
                 tuple(rows), ("The first seed is train.seed: the grid cell's own run.",))


def length_tests_table(inputs: ReportInputs, method: str = "beam") -> Table | None:
    """Per length bucket, each attention system's p against its baseline, one run and over
    replicates (None without a tested system)."""
    summary = inputs.replicates or {}
    tested = [cell for cell in inputs.ordered_cells()
              if summary["systems"][cell]["methods"].get(method, {}).get("vs_baseline")]
    if not tested:
        return None
    labels = list(summary["systems"][tested[0]]["methods"][method]["vs_baseline"]["by_length"])
    columns = ["Source length"]
    for cell in tested:
        columns += [f"{_name(inputs, cell)} p, one run", f"{_name(inputs, cell)} p, replicates"]
    rows = []
    for label in labels:
        row = [bucket_words(label)]
        for cell in tested:
            one_run = inputs.evals[cell]["systems"][method]["vs_baseline"]["by_length"]
            seeded = summary["systems"][cell]["methods"][method]["vs_baseline"]["by_length"]
            row += [fmt(one_run.get(label), 3), fmt(seeded.get(label), 3)]
        rows.append(tuple(row))
    return Table(f"Significance by source length ({method} against the baseline): one run "
                 "and over replicates", tuple(columns), tuple(rows),
                 ("p null (-): fewer test sentences than evaluate.min_bucket_sentences.",))


def figure2(inputs: ReportInputs, method: str = "beam", min_sentences: int = 1) -> Figure:
    """Figure 2 over replicates: each system's mean BLEU by source length, banded ± one sd."""
    summary = inputs.replicates or {}
    curves, bands = {}, {}
    for cell in inputs.ordered_cells():
        spreads = summary["systems"][cell]["methods"].get(method)
        if spreads is None:
            continue
        rows = inputs.evals[cell]["systems"][method]["by_length"]
        means = {label: {**rows[label], "bleu": spread["mean"]}
                 for label, spread in spreads["by_length"].items()}
        name = f"{_name(inputs, cell)} (n={len(summary['systems'][cell]['cells'])})"
        curves[name] = length_curve(means, min_sentences)
        bands[name] = {rows[label]["step"]: spread["sd"]
                       for label, spread in spreads["by_length"].items()}
    return bleu_by_length_figure(curves, f"BLEU by source sentence length ({method}), "
                                 "mean ± sd over seeds", min_sentences, bands)
