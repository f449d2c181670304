"""Write the report: tables (Markdown + LaTeX) and figures (PNG) under ``<reports>/results/``,
and the index page ``<reports>/README.md`` that shows them."""
from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from rnnsearch.config.report import ReportConfig
from rnnsearch.config.train import BudgetConfig
from rnnsearch.data.textio import atomic_dir, atomic_write_text
from rnnsearch.reporting import alignment, build, replicates, training
from rnnsearch.reporting.corpus import unknown_corpus_table
from rnnsearch.reporting.png import save_figure
from rnnsearch.reporting.rare_words import rare_words_figure, rare_words_table
from rnnsearch.reporting.senses import senses_figure, senses_table
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.tables import Table

RESULTS = "results"
REGENERATE = ("Regenerate with `dvc repro report` (or `PYTHONPATH=src python pipeline/report.py`): "
              "it reads the metrics files only and takes seconds.")
DEFAULT_PLACES = ("params.yaml", "metrics", "reports")   # the report stage's params, metrics, reports


def regenerate_line(params: str | Path, metrics: str | Path, reports: str | Path) -> str:
    """The index page's "Regenerate with" line: the report stage for the default run, else the
    command rebuilding this folder from ``metrics`` and ``params`` into ``reports``."""
    places = [_relative(place) for place in (params, metrics, reports)]
    if tuple(places) == DEFAULT_PLACES:
        return REGENERATE
    args = shlex.join(["--params", places[0], "--metrics", places[1], "--reports", places[2],
                       "--no-mlflow"])
    return (f"Regenerate with `PYTHONPATH=src python pipeline/report.py {args}` (from the "
            f"repository root): it reads the metrics files only and takes seconds.")


def _relative(place: str | Path) -> str:
    """``place`` relative to the working directory when it lies inside it (POSIX form)."""
    path = Path(place)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return path.as_posix()


def kept_heading(index: Path) -> str:
    """The quoted paragraph heading an existing index page (an exported preset's provenance,
    ``> Preset ...``), kept when the page is written again; ``""`` when there is none."""
    if not index.is_file():
        return ""
    text = index.read_text(encoding="utf-8")
    return text[:text.index("\n\n") + 2] if text.startswith("> ") and "\n\n" in text else ""


def write_report(inputs: ReportInputs, cfg: ReportConfig, reports: Path,
                 min_sentences: int = 1, regenerate: str = REGENERATE,
                 budget: BudgetConfig = BudgetConfig()) -> list[Path]:
    """Write every table and figure; returns the files written (index page last, its quoted
    heading kept). Buckets under ``min_sentences`` are marked; ``regenerate``: the rebuild line
    (:func:`regenerate_line`); ``budget``: the run's ``train.budget`` (what stopped each cell)."""
    tables = _tables(inputs, cfg, min_sentences, budget)
    with atomic_dir(reports / RESULTS) as tmp:
        for name, table in tables.items():
            atomic_write_text(tmp / f"{name}.md", table.markdown())
            atomic_write_text(tmp / f"{name}.tex", table.latex())
        figures = _write_figures(inputs, cfg, tmp, min_sentences)
    index = reports / "README.md"
    atomic_write_text(index, kept_heading(index) + _index(tables, figures, regenerate))
    written = sorted((reports / RESULTS).iterdir())
    return written + [index]


def _tables(inputs: ReportInputs, cfg: ReportConfig, min_sentences: int, budget: BudgetConfig
            ) -> dict[str, Table]:
    corpus = inputs.corpus
    tables = {"corpus": corpus.table() if corpus is not None else unknown_corpus_table(),
              "table1": build.table1(inputs, cfg.method)}
    if inputs.replicates is not None:       # the same over seeds, mean ± sd
        tables["table1"] = replicates.table1(inputs, cfg.method)
        tables[replicates.SEEDS_FILE] = replicates.seeds_table(inputs)
        tested = replicates.length_tests_table(inputs, cfg.method)
        tables.update({"significance_by_length": tested} if tested is not None else {})
    warning = training.unequal_training(inputs, budget)
    tables["table1"] = dataclasses.replace(tables["table1"], notes=tables["table1"].notes + warning)
    if inputs.evals:
        tables["bleu_by_length"] = build.length_table(inputs, cfg.method, min_sentences)
        tables["speed"] = build.speed_table(inputs)
        searched = build.search_error_table(inputs)
        tables.update({"search_error": searched} if searched is not None else {})
        tables.update(build.gain_tables(inputs, cfg.method, min_sentences))
    trained = training.training_table(inputs, budget)
    tables.update({"training": trained} if trained is not None else {})
    rare = rare_words_table(inputs)
    if rare is not None:
        tables["rare_words"] = rare
    variants = build.variants_table(inputs, cfg.method)
    if variants is not None:
        tables["variants"] = variants
    tables.update(build.other_tables(inputs))
    if inputs.senses is not None:
        tables["word_senses"] = senses_table(inputs.senses)
    aligned = (alignment.alignment_table(inputs.align, inputs.align_attention)
               or alignment.no_gold_table(inputs.align))
    if aligned is not None:
        tables["alignment_quality"] = aligned
    return tables


def _write_figures(inputs: ReportInputs, cfg: ReportConfig, folder: Path, min_sentences: int
                   ) -> dict[str, str]:
    """PNG files by caption."""
    figures = {}
    if inputs.evals:
        figures["Figure 2: BLEU by source sentence length"] = "figure2_bleu_by_length.png"
        figure2 = build.figure2 if inputs.replicates is None else replicates.figure2
        save_figure(figure2(inputs, cfg.method, min_sentences), folder / "figure2_bleu_by_length.png")
    rare = rare_words_figure(inputs)
    if rare is not None:
        figures["Unigram F1 by the word's training frequency rank"] = "rare_words_f1_by_rank.png"
        save_figure(rare, folder / "rare_words_f1_by_rank.png")
    for cell, figure in build.figure3(inputs, cfg.alignment_sentences).items():
        figures[f"Figure 3: alignments, {cell}"] = f"figure3_{cell}.png"
        save_figure(figure, folder / f"figure3_{cell}.png")
    for cell, figure in alignment.overlay_figures(inputs.align_attention).items():
        figures[f"Attention against the gold links, {cell}"] = f"alignment_gold_{cell}.png"
        save_figure(figure, folder / f"alignment_gold_{cell}.png")
    senses = senses_figure(inputs.senses) if inputs.senses is not None else None
    if senses is not None:
        figures["Word senses: PCA of the sense vectors"] = "word_senses_pca.png"
        save_figure(senses, folder / "word_senses_pca.png")
    return figures


def _index(tables: dict[str, Table], figures: dict[str, str], regenerate: str) -> str:
    """``reports/README.md``: every table inline, every figure as an image, LaTeX links."""
    parts = ["# Results: the papers' tables and figures", "", regenerate, ""]
    for name, table in tables.items():
        if name == "bleu_by_length":
            continue
        parts += [table.markdown(), f"LaTeX: [{RESULTS}/{name}.tex]({RESULTS}/{name}.tex)", ""]
        if name == "table1":
            parts += _figure_parts(figures, tables)
    return "\n".join(parts)


def _figure_parts(figures: dict[str, str], tables: dict[str, Table]) -> list[str]:
    parts = []
    for caption, file in figures.items():
        parts += [f"### {caption}", "", f"![{caption}]({RESULTS}/{file})", ""]
        if file.startswith("figure2") and "bleu_by_length" in tables:
            parts += [tables["bleu_by_length"].markdown(), ""]
    return parts
