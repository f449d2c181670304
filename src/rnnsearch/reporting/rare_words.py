"""Sennrich, Haddow & Birch 2016's rare-word measure: unigram F1 by training frequency, as a table
(all, in vocabulary, rare, unseen) and a figure (F1 by rank), from ``metrics/eval/<cell>.json``
(:mod:`rnnsearch.evaluation.rare_words`); cells without the measure are left out."""
from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from rnnsearch.reporting.figures import Curve, f1_by_rank_figure
from rnnsearch.reporting.inputs import F1_CLASSES, ReportInputs
from rnnsearch.reporting.paper import display_name
from rnnsearch.reporting.tables import Table, fmt

CLASS_COLUMNS = dict(zip(F1_CLASSES, ("All", "In vocabulary", "Rare", "Unseen")))


def measured(inputs: ReportInputs) -> list[tuple[str, str, dict[str, Any]]]:
    """``(model name, system, unigram_f1)`` of every measured system, in the report's order."""
    rows = []
    for cell in inputs.ordered_cells():
        metrics = inputs.evals[cell]
        name = display_name(metrics["model"]["name"], metrics["model"].get("max_len"))
        rows += [(name, system, scores["unigram_f1"])
                 for system, scores in metrics["systems"].items() if "unigram_f1" in scores]
    return rows


def rare_words_table(inputs: ReportInputs) -> Table | None:
    """Unigram F1 (%) per class of words, one row per cell and system (None: nothing measured)."""
    rows = measured(inputs)
    if not rows:
        return None
    body = tuple((name, system, *(fmt(f1[c]["f1"]) for c in CLASS_COLUMNS))
                 for name, system, f1 in rows)
    return Table("Unigram F1 (%) by the word's frequency in the training target text",
                 ("Model", "System", *CLASS_COLUMNS.values()), body, _notes(inputs, rows[0][2]))


def _training_words(inputs: ReportInputs) -> dict[str, int]:
    """The first measured cell's ``training_words`` (evaluate gives every cell the same)."""
    return next(inputs.evals[c]["training_words"] for c in inputs.ordered_cells()
                if "training_words" in inputs.evals[c])


def _notes(inputs: ReportInputs, first: dict[str, Any]) -> tuple[str, ...]:
    words = _training_words(inputs)
    refs = ", ".join(f"{CLASS_COLUMNS[c].lower()} {first[c]['ref_tokens']}"
                     for c in CLASS_COLUMNS if c != "all")
    return ("Sennrich, Haddow & Birch 2016's measure: per sentence, hypothesis words matched "
            "with reference words (clipped counts), on Moses tokens (subword pieces joined "
            "back into words); F1 = 2 matched / (hypothesis + reference tokens) of the class.",
            f"Classes by the word's rank in the training target text "
            f"({words['training_types']} word types, {words['training_tokens']} tokens): in "
            f"vocabulary = the {words['vocabulary_words']} most frequent "
            f"({vocabulary_meaning(inputs)}), rare = seen in training but outside it, unseen = "
            "never seen (a "
            "hypothesis' `<unk>` counts here). `_unk` systems: `<unk>` replaced from "
            "attention, the back-off baseline of Sennrich et al.",
            f"Reference tokens per class: {refs}.",
            "No paper column: Sennrich et al.'s numbers are WMT'15 En->De and En->Ru with a "
            "50k-word vocabulary.")


def subword_run(inputs: ReportInputs) -> bool:
    """Whether the run's units are subword pieces (its cells have ``no_unk_words`` scores)."""
    return any("no_unk_words_sentences" in m for m in inputs.evals.values())


def vocabulary_meaning(inputs: ReportInputs) -> str:
    """What "in vocabulary" means: the word-level vocabulary, or in a subword run (whose own
    holds pieces) the one a word-level model of its size would have."""
    if subword_run(inputs):
        return ("the words a word-level model of this size would know; this run's vocabulary "
                "holds subword pieces, evaluate.word_vocab_size sets the number")
    return "the word-level vocabulary"


def rank_curve(f1: dict[str, Any]) -> Curve:
    """A system's ``unigram_f1.by_rank`` as the figure's ``(step, label, F1)`` points."""
    return [(row["step"], label, row["f1"]) for label, row in f1["by_rank"].items()]


def rare_words_figure(inputs: ReportInputs) -> Figure | None:
    """F1 by training frequency rank, one line per cell and system (None: nothing measured)."""
    rows = measured(inputs)
    if not rows:
        return None
    curves = {f"{name} {system}": rank_curve(f1) for name, system, f1 in rows}
    return f1_by_rank_figure(curves, _training_words(inputs)["vocabulary_words"],
                             "Unigram F1 by the word's training frequency rank")
