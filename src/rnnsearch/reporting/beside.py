"""A preset's cells beside the default run's (or another preset's), from two metrics folders:
per cell shared by name, a table row per run (BLEU, ``<unk>`` replaced, No-UNK, chrF, unigram
F1, attention AER) and both runs' Figure 2 curves; ``significance.json``
(:func:`rnnsearch.runs.comparison.significance`) adds p-values and a per-bucket table. Runs
whose test sets may differ are refused with the reason (:func:`unshared_test_set`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from matplotlib.figure import Figure

from rnnsearch.config.base import read_params
from rnnsearch.data.textio import atomic_write_text
from rnnsearch.reporting.figures import LengthCurve, bleu_by_length_figure, length_curve
from rnnsearch.reporting.png import save_figure
from rnnsearch.reporting.inputs import ReportInputs, read_metrics_json
from rnnsearch.reporting.paper import display_name
from rnnsearch.reporting.rare_words import CLASS_COLUMNS
from rnnsearch.reporting.replicates import mean_sd
from rnnsearch.reporting.summary import cell_summary
from rnnsearch.reporting.tables import Table, bucket_words, fmt

BESIDE = "beside_default"        # the files' stem: beside_default.{md,tex,png}
# prepare params that say where the corpus files are found, not which sentences are drawn
LOCATION_KEYS = ("mirror", "download", "cache_dir")
HEADER = ("Model", "Run", "Units", "BLEU", "BLEU, UNK replaced", "No-UNK BLEU (sentences)",
          "chrF", "Length ratio", *(f"F1 {c}" for c in CLASS_COLUMNS.values()), "AER (argmax)",
          "AER (threshold)", "p AER (argmax / threshold)", "p BLEU (paired bootstrap)",
          "Decoding (s)")


def significance_file(baseline: str) -> str:
    """``significance.json`` against the default run, else ``significance_<baseline>.json``."""
    return "significance.json" if baseline == "default" else f"significance_{baseline}.json"


@dataclass(frozen=True)
class Run:
    """A run as compared: its metrics, units, and the ``prepare`` params and ``align.train_links``
    of the ``params.yaml`` beside its metrics folder (None: no such file, or no links)."""

    label: str                     # the Run column: "default", or the preset's name
    shown: str                     # the metrics folder as the text names it: "metrics/"
    inputs: ReportInputs
    units: str
    prepare: dict[str, Any] | None
    train_links: str | None = None

    @property
    def title(self) -> str:
        """How the text names the run: "the default run", "the preset 'luong'"."""
        return "the default run" if self.label == "default" else f"the preset '{self.label}'"

    @property
    def significance_file(self) -> str:
        """Where a preset's exported folder keeps its paired bootstrap against this run."""
        return significance_file(self.label)

    @classmethod
    def load(cls, label: str, metrics: Path, shown: str) -> "Run":
        """Read ``metrics`` (as the report does) and the ``params.yaml`` beside it."""
        path = metrics.parent / "params.yaml"
        params = read_params(path) if path.is_file() else {}
        return cls(label, shown, ReportInputs.load(metrics), units_of(metrics / "tokenize.json"),
                   params.get("prepare") if path.is_file() else None,
                   (params.get("align") or {}).get("train_links"))


class Outcome(NamedTuple):
    """What :func:`write_beside` did: the files written (none: see ``message``) and a line."""

    written: list[Path]
    message: str


def units_of(path: Path) -> str:
    """A run's units and vocabulary sizes (source/target) from ``metrics/tokenize.json``:
    ``word 10000/10000``, ``bpe (joint) 10000/10000``; ``?`` without the file."""
    if not path.is_file():
        return "?"
    data = read_metrics_json(path, "rerun the tokenize stage")
    sizes, subword = data.get("vocab_size", {}), data.get("subword", {})
    joint = " (joint)" if subword.get("joint") else ""
    return (f"{subword.get('units', 'word')}{joint} "
            f"{sizes.get('src', '?')}/{sizes.get('tgt', '?')}")


def another_corpus(default: Run, preset: Run) -> str | None:
    """A note when the preset translates another corpus or language pair (``prepare.json``)."""
    corpora = [(run.inputs.prepare or {}).get("corpus") for run in (default, preset)]
    if not all(isinstance(corpus, dict) for corpus in corpora):
        return None
    shown = [f"{c.get('name')} {c.get('src_lang')}->{c.get('tgt_lang')}" for c in corpora]
    return (f"it translates another corpus ({shown[1]}; {default.title}: {shown[0]})"
            if shown[0] != shown[1] else None)


def unshared_test_set(default: Run, preset: Run) -> str | None:
    """Why the runs' test sets may differ (None: they agree), from ``prepare.json``'s corpus and
    test blocks and, where both have them, the ``prepare`` params (but :data:`LOCATION_KEYS`)."""
    for run in (default, preset):
        if run.inputs.prepare is None:
            return f"{run.shown}prepare.json is missing, so the test sets cannot be compared"
    if (corpus := another_corpus(default, preset)) is not None:
        return corpus
    for block in ("corpus", "test"):
        for run in (default, preset):
            if not isinstance(run.inputs.prepare.get(block), dict):
                return (f"{run.shown}prepare.json has no '{block}' block (written before the "
                        "prepare stage recorded it), so the test sets cannot be compared")
        if default.inputs.prepare[block] != preset.inputs.prepare[block]:
            return (f"the test sets differ: the '{block}' blocks of {default.shown}prepare.json "
                    f"and {preset.shown}prepare.json disagree")
    if default.prepare is not None and preset.prepare is not None:
        keys = sorted(k for k in default.prepare.keys() | preset.prepare.keys()
                      if k not in LOCATION_KEYS and default.prepare.get(k) != preset.prepare.get(k))
        if keys:
            return (f"the test sets may differ: the params.yaml files beside the two folders "
                    f"set prepare.{', prepare.'.join(keys)} differently")
    return None


def headline(run: Run, cell: str, method: str) -> tuple[str, ...]:
    """A cell's row after Model and Run: units, BLEU (all, ``<unk>`` replaced, No-UNK with its
    sentences), chrF, length ratio, unigram F1 per word class, AER argmax and thresholded
    (``–``: not in the run's metrics)."""
    systems = run.inputs.evals[cell]["systems"]
    ratio = systems.get(method, {}).get("all", {}).get("len_ratio")
    summary = cell_summary(run.inputs, cell, method)
    replaced = systems.get(f"{method}_unk", {}).get("all", {}).get("bleu")
    no_unk = word_no_unk(systems.get(method, {}))
    f1 = systems.get(method, {}).get("unigram_f1", {})
    attention = run.inputs.align_attention or {}
    scores = attention.get("cells", {}).get(cell, {}).get("scores", {})
    aer = [scores.get(name, {}).get("aer")
           for name in ("argmax", f"threshold {attention.get('threshold')}")]
    return (run.units, replicate_bleu(run, cell, method) or fmt(summary.get("bleu")),
            fmt(replaced),
            f"{fmt(no_unk.get('bleu'))} ({fmt(no_unk.get('n'))})", fmt(summary.get("chrf")),
            fmt(ratio, 3), *(fmt(f1.get(c, {}).get("f1")) for c in CLASS_COLUMNS),
            *(fmt(a, 3) for a in aer))


def replicate_bleu(run: Run, cell: str, method: str) -> str | None:
    """``mean ± sd (n=3)`` of the cell's BLEU over the run's replicates (None: it has none)."""
    system = (run.inputs.replicates or {}).get("systems", {}).get(cell)
    spread = (system or {}).get("methods", {}).get(method, {}).get("all")
    return None if spread is None else f"{mean_sd(spread)} (n={spread['n']})"


def decoding_seconds(run: Run, cell: str, method: str) -> str:
    """Seconds ``method`` took on the whole test set (``–``: not timed, e.g. ``_unk`` systems)."""
    return fmt(run.inputs.evals[cell].get("speed", {}).get(method, {}).get("seconds"), 1)


def word_no_unk(system: dict[str, Any]) -> dict[str, Any]:
    """A system's scores on the sentences with no word outside word-level vocabularies: a
    subword run's ``no_unk_words``, a word-level run's ``no_unk``."""
    return system.get("no_unk_words") or system.get("no_unk", {})


def cell_length_curve(run: Run, cell: str, method: str, min_sentences: int) -> LengthCurve:
    """A cell's BLEU per source-length bucket (words), as Figure 2's points."""
    by_length = run.inputs.evals[cell]["systems"].get(method, {}).get("by_length", {})
    return length_curve(by_length, min_sentences)


def shared_cells(default: Run, preset: Run) -> list[str]:
    """The cells of both grids (by name), in the default report's order."""
    return [cell for cell in default.inputs.ordered_cells() if cell in preset.inputs.evals]


def differing_cells(default: Run, preset: Run, method: str) -> list[str]:
    """The shared cells whose row or BLEU-by-length curve differs between the runs (a cell DVC
    reused would show two identical rows; the files themselves always differ in timings)."""
    return [cell for cell in shared_cells(default, preset)
            if (headline(default, cell, method), cell_length_curve(default, cell, method, 1))
            != (headline(preset, cell, method), cell_length_curve(preset, cell, method, 1))]


SMALLEST_P_OF_A_DIFFERENCE = 0.05   # equal scores cannot differ this surely


def p_difference(test: dict[str, Any], score: str = "aer") -> str:
    """A test's p-value, or ``same AER``/``same BLEU`` where both runs' ``score`` is equal yet p
    is small: identical outputs (model or translations reused), to which the +1-smoothed
    bootstrap gives p = 1/(samples+1) as if the surest difference (different outputs of equal
    rounded score get a large p, shown as is)."""
    p = test.get("p_value")
    same = (test.get(score) is not None and test.get(score) == test.get(f"baseline_{score}")
            and p is not None and p < SMALLEST_P_OF_A_DIFFERENCE)
    return f"same {score.upper()}" if same else fmt(p, 3)


def model_name(run: Run, cell: str) -> str:
    """``search-50`` -> ``RNNsearch-50``, from the cell's metrics."""
    model = run.inputs.evals[cell]["model"]
    return display_name(model["name"], model.get("max_len"))


def beside_table(default: Run, preset: Run, cells: list[str], method: str,
                 tests: dict[str, Any] | None = None) -> Table:
    """One row per run and cell, the default run's first; ``tests``: significance.json's
    cells (the preset row's p-values, of AER and of BLEU, against the default row)."""
    def test(run: Run, cell: str) -> dict[str, Any]:
        return ((tests or {}).get(cell) or {}) if run is preset else {}

    def p_aer(run: Run, cell: str) -> str:
        variants = ("argmax", f"threshold {threshold}")
        aer = test(run, cell).get("aer", {})
        return " / ".join(p_difference(aer.get(v, {})) for v in variants) if aer else "–"

    def p_bleu(run: Run, cell: str) -> str:
        one_run = p_difference(test(run, cell).get("all", {}), "bleu")
        seeded = test(run, cell).get("replicates")
        if seeded is None:
            return one_run
        return f"{one_run}; seeds: {fmt(seeded['all']['p_value'], 3)}"

    threshold = (preset.inputs.align_attention or {}).get("threshold")
    rows = tuple((model_name(default, cell), run.label, *headline(run, cell, method),
                  p_aer(run, cell), p_bleu(run, cell), decoding_seconds(run, cell, method))
                 for cell in cells for run in (default, preset))
    return Table(f"The preset '{preset.label}' beside {default.title} ({method})", HEADER, rows,
                 (f"BLEU and chrF: sacreBLEU on detokenised output against the raw references; "
                  f"UNK replaced: the `{method}_unk` system, `<unk>` replaced from attention "
                  "(Sennrich et al.'s back-off baseline; `–` without attention or with subword "
                  "units, where there is none). Length ratio: the output's length over the "
                  "references' (sacreBLEU's, all sentences; brevity costs BLEU below 1).",
                  "No-UNK: the test sentences whose source and reference have no word outside "
                  "the word-level vocabularies (Bahdanau et al.'s column): a word-level run's "
                  "own; for a subword run, the vocabularies a word model of its sizes would have "
                  "(evaluate's `no_unk_words`), so that runs with vocabularies of the same sizes "
                  "are scored on the same sentences (the sentence counts say so; with pieces, a "
                  "run's own No-UNK subset is nearly every sentence).",
                  "F1: unigram F1 (%) by the word's frequency in the training target text "
                  "(Sennrich, Haddow & Birch 2016), on words. AER: attention's links against "
                  "the Hansard gold links, on words: each target word's argmax source word, or "
                  f"every source word of weight above {fmt(threshold)} (threshold). `–`: not in "
                  "that run's metrics (not measured, or evaluated before the measure existed).",
                  "p BLEU: paired bootstrap resampling (sacreBLEU, Koehn 2004) of the preset's "
                  f"BLEU against {default.title}'s on the same sentences "
                  f"({default.significance_file}; `–`: not tested, e.g. the translations were "
                  "not in the DVC cache when the comparison was made). p AER: the same test of "
                  "the attention's AER on the gold sentences, argmax and thresholded links (`–`: "
                  "not tested, e.g. a model without attention, or the models not in the DVC "
                  "cache; `same AER`, `same BLEU`: both runs' score is the same, e.g. one model "
                  "decoded twice, or a run's first replicate the other run's model).",
                  "Decoding: the seconds the whole test set took to decode, in batches of "
                  "`translate.batch_size`, on the machine each run was made on (each run's "
                  "`environment` block names it): compare them between runs of one machine.",
                  *replicates_notes(default, preset, tests)))


def replicates_notes(default: Run, preset: Run, tests: dict[str, Any] | None) -> tuple[str, ...]:
    """The notes on replicates, when a run has them (none otherwise)."""
    seeded = next((t["replicates"] for t in (tests or {}).values() if "replicates" in t), None)
    if seeded is None and not (default.inputs.replicates or preset.inputs.replicates):
        return ()
    note = ("BLEU of a run with replicates (replicates.seeds): mean ± sample standard deviation "
            "over its seeds (n), each seed's in that run's results/table1_seeds.md.")
    if seeded is not None:
        note += (" p BLEU `one run; seeds:` the paired bootstrap of the first replicates, then "
                 "the replicate-aware bootstrap over the seeds both runs trained "
                 f"({', '.join(str(s) for s in seeded['seeds'])}; docs/replicates.md).")
    return (note,)


def length_table(default: Run, preset: Run, cells: list[str], method: str,
                 tests: dict[str, Any], min_sentences: int) -> Table:
    """BLEU per source-length bucket of both runs, with the bucket's p-value (tested cells)."""
    rows = []
    for cell in cells:
        if cell not in tests:
            continue
        runs = [run.inputs.evals[cell]["systems"][method]["by_length"] for run in (default, preset)]
        for bucket, p in tests[cell]["by_length"].items():
            n = runs[0].get(bucket, {}).get("n")
            bleu = [r.get(bucket, {}).get("bleu") for r in runs]
            rows.append((model_name(default, cell), bucket_words(bucket), fmt(n),
                         *map(fmt, bleu), p_difference({"bleu": bleu[1], "baseline_bleu": bleu[0],
                                                        "p_value": p}, "bleu")))
    return Table(f"BLEU by source sentence length, {default.title.removeprefix('the ')} vs "
                 f"'{preset.label}' ({method})",
                 ("Model", "Source words", "Sentences", f"BLEU {default.label}",
                  f"BLEU {preset.label}", "p (paired bootstrap)"), tuple(rows),
                 (f"Source words: the bucket of the source sentence's length. p: paired "
                  f"bootstrap within the bucket (`–`: fewer than {min_sentences} sentences, "
                  "not tested).",))


def aligner_line(run: Run, links: str | None) -> str:
    """The statistical aligners' AER on the same gold sentences (``metrics/align.json``): the
    best, and the one whose links trained the attention (``links``: ``model/symmetrisation``)."""
    scores = {f"{model}/{name}": score["aer"]
              for model, entry in ((run.inputs.align or {}).get("models") or {}).items()
              for name, score in (entry.get("scores") or {}).items() if "aer" in score}
    if not scores:
        return ""
    best = min(scores, key=scores.get)
    line = f"The statistical aligners on the same gold sentences: best `{best}` AER {scores[best]:.3f}"
    if links in scores:
        line += f"; `{links}`, whose links the preset's attention was trained towards, {scores[links]:.3f}"
    return line + f" ({run.shown}align.json)."


def intro(default: Run, preset: Run) -> str:
    """The sentence naming both metrics folders and what says the test set is the same."""
    compared = ("their prepare.json files record the same corpus and test split (test files, "
                "pairs per length bucket, raw and cleaned counts)")
    if default.prepare is not None and preset.prepare is not None:
        compared += " and the params.yaml files beside them the same prepare params"
    return (f"Generated from two metrics folders: `{default.shown}` ({default.title}) and "
            f"`{preset.shown}` (the preset '{preset.label}'). The test set is the same: "
            f"{compared}.")


def write_beside(default: Run, preset: Run, out: Path, method: str = "beam",
                 min_sentences: int = 1, tests: dict[str, Any] | None = None,
                 stem: str = BESIDE) -> Outcome:
    """Replace ``<out>/<stem>.{md,tex,png}``: table and figure of the :func:`differing_cells`,
    p-values from ``tests`` (significance.json's cells). Nothing written without a differing cell
    or for another corpus; same corpus but test sets that may differ: only the .md, the reason."""
    files = [out / f"{stem}.{ext}" for ext in ("md", "tex", "png")]
    for path in files:
        path.unlink(missing_ok=True)
    if not shared_cells(default, preset):
        return Outcome([], f"no cell of the preset '{preset.label}' shares its name with "
                           f"{default.title}'s: nothing to put beside it")
    cells = differing_cells(default, preset, method)
    if not cells:
        return Outcome([], f"the cells the preset '{preset.label}' shares with {default.title} "
                           "have the same numbers in both runs: no comparison written")
    reason = unshared_test_set(default, preset)
    if reason is not None:
        message = f"not compared with {default.title}: {reason}"
        if another_corpus(default, preset):
            return Outcome([], message)           # nothing to put beside it: no page
        atomic_write_text(files[0], f"# The preset '{preset.label}' beside {default.title}\n\n"
                                    f"{message[0].upper()}{message[1:]}.\n")
        return Outcome(files[:1], message)
    tables = [beside_table(default, preset, cells, method, tests)]
    if tests:
        tables.append(length_table(default, preset, cells, method, tests, min_sentences))
    out.mkdir(parents=True, exist_ok=True)
    curves = {f"{model_name(run, cell)} ({run.label})": cell_length_curve(run, cell, method,
                                                                           min_sentences)
              for cell in cells for run in (default, preset)}
    figure = bleu_by_length_figure(curves, f"BLEU by source sentence length ({method}): "
                                           f"{default.label} vs {preset.label}", min_sentences)
    save_figure(paired(figure), files[2])
    atomic_write_text(files[0], page(default, preset, tables, files[2].name, files[1].name))
    atomic_write_text(files[1], "\n".join(table.latex() for table in tables))
    # the folder as shown, not the temporary copy that export writes and renames into place
    page_shown = PurePosixPath(preset.shown).parent / files[0].name
    return Outcome(files, f"{', '.join(cells)} beside {default.title}'s in {page_shown}")


def paired(figure: Figure) -> Figure:
    """Each cell's two curves (default run, then preset) in one colour, the preset's dashed."""
    ax = figure.axes[0]
    for i, line in enumerate(ax.get_lines()):
        line.set_color(f"C{i // 2}")
        line.set_linestyle("--" if i % 2 else "-")
    ax.legend()
    return figure


def page(default: Run, preset: Run, tables: list[Table], figure: str, latex: str) -> str:
    """``beside_default.md``: :func:`intro`, the tables, the aligners' AER, the figure (file
    ``figure``) and how to regenerate it."""
    caption = "BLEU by source sentence length (words), both runs"
    aligners = aligner_line(preset, preset.train_links)
    return "\n".join([
        f"# The preset '{preset.label}' beside {default.title}", "", intro(default, preset), "",
        tables[0].markdown(), *([aligners, ""] if aligners else []),
        *(table.markdown() for table in tables[1:]),
        f"### {caption}", "", f"![{caption}]({figure})", "",
        f"LaTeX: [{latex}]({latex}). Regenerate with `python -m rnnsearch.presets compare "
        f"{preset.label}{'' if default.label == 'default' else ' --against ' + default.label}`: "
        f"the DVC stage `compare@{preset.label}-vs-{default.label}` of "
        "[`reports/presets/dvc.yaml`](../dvc.yaml), which needs both runs' git branches and DVC "
        "cache; `dvc status reports/presets/dvc.yaml` says when it is stale."]) + "\n"
