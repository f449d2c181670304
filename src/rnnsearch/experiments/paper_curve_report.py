"""``python -m rnnsearch.experiments.paper_curve report --results DIR``: the GPU run, scored.

Reads what ``paper_curve run`` wrote (``run.json``, ``<cell>.<method>.tok.txt``; in DIR, or in
a ``.tar.gz`` of that folder, as brought back from a GPU box) and the data
``pack`` left in ``data/paper_curve/`` (raw references in ``prepared/``, tokens and vocabularies
in ``tokenized/``), and refuses, naming the file, a run made from another pack (its sha256) or a
hypothesis file whose line count is not the test set's. Then, with the evaluate stage's own
code: each cell's hypotheses are detokenised and written in the translate stage's layout
(``data/paper_curve/translations/<cell>/``), scored by
:func:`~rnnsearch.evaluation.evaluate_cell` (all sentences, no-UNK, BLEU by source length,
paired bootstrap of RNNsearch against RNNencdec; ``data/paper_curve/metrics/eval/<cell>.json``),
and the tables are the report stage's (:mod:`rnnsearch.reporting.build`) beside the default CPU
run's ``metrics/eval`` numbers. Written, whole, to ``reports/paper_curve/``: ``paper_curve.md``,
``paper_curve.tex``, ``paper_curve.png`` (Figure 2: BLEU against source length, one line per
model and run) and the run's ``run.json``. Not ``reports/results/``: the report stage replaces
that folder whole.
"""
from __future__ import annotations

import contextlib
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Iterator

import matplotlib.pyplot as plt

from rnnsearch.config.base import from_dict, read_params
from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.config.repository import repo_root
from rnnsearch.data.textio import (atomic_dir, atomic_write_text, read_json, read_lines,
                                   write_json, write_lines)
from rnnsearch.errors import DataError
from rnnsearch.data.tokenize import detokenize
from rnnsearch.evaluation.cell import TestSet, evaluate_cell
from rnnsearch.experiments.paper_curve_files import (MAX_LEN, PACK, PARAMS, RESULTS, hyp_file,
                                                     sha256_of)
from rnnsearch.reporting import build
from rnnsearch.reporting.figures import bleu_by_length_figure, length_curve
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.paper import display_name
from rnnsearch.reporting.tables import Table, fmt

FOLDER = "paper_curve"
METHOD = "beam"                      # the figure's and the comparison's decoding
BASELINE = f"encdec-{MAX_LEN}"


def read_run(results: Path, pack: Path) -> dict[str, Any]:
    """``<results>/run.json``, refused unless it was made from ``pack`` (same sha256)."""
    path = results / RESULTS
    run = read_json(path)
    if not isinstance(run, dict) or "pack" not in run or "cells" not in run:
        raise DataError(f"{path}: not a paper_curve run.json (no 'pack' or 'cells')")
    if not pack.is_file():
        raise DataError(f"{pack}: not found; the report reads the data of the pack the run used")
    ours, theirs = sha256_of(pack), run["pack"].get("sha256")
    if ours != theirs:
        raise DataError(f"{path}: made from a pack with sha256 {theirs}, but {pack} has {ours}; "
                        f"report a run against the pack it ran on")
    return run


def read_hypotheses(path: Path, sentences: int) -> list[str]:
    """A hypothesis file's lines, refused unless there is one per test sentence."""
    lines = read_lines(path)
    if len(lines) != sentences:
        raise DataError(f"{path}: {len(lines)} lines, but the test set has {sentences} "
                        f"sentences (cut short, or from another test set)")
    return lines


def decoded(run: dict[str, Any]) -> dict[str, list[str]]:
    """Cell -> the methods it decoded (cells the run skipped, did not reach or failed to
    train, and methods that failed, are left out)."""
    cells = {cell: [method for method, row in info.get("decode", {}).items() if "error" not in row]
             for cell, info in run["cells"].items()}
    return {cell: methods for cell, methods in cells.items() if methods}


def write_cell(folder: Path, cell: str, run: dict[str, Any], results: Path, test: TestSet,
               tgt_lang: str) -> None:
    """One cell's hypotheses in the translate stage's layout: ``<method>.tok.txt``,
    ``<method>.detok.txt`` and ``meta.json`` (what :func:`evaluate_cell` reads)."""
    info, methods = run["cells"][cell], decoded(run)[cell]
    folder.mkdir(parents=True, exist_ok=True)
    for method in methods:
        tokens = read_hypotheses(results / hyp_file(cell, method), len(test.refs))
        write_lines(folder / f"{method}.tok.txt", tokens)
        write_lines(folder / f"{method}.detok.txt",
                    [detokenize(line.split(), tgt_lang) for line in tokens])
    write_json(folder / "meta.json", {
        "cell": cell, "model": info["model"], "has_attention": info["model"]["model"] != "encdec",
        "device": run["settings"]["device"], "sentences": len(test.refs), "systems": methods,
        "search": run["settings"]["search"], "speed": info["decode"]})


def score(run: dict[str, Any], results: Path, work: Path) -> dict[str, dict[str, Any]]:
    """Every decoded cell scored by the evaluate stage's code (RNNsearch tested against
    RNNencdec); the metrics are also written to ``<work>/metrics/eval/``."""
    params = read_params(work / PARAMS)
    cfg = from_dict(EvaluateConfig, params["evaluate"], "evaluate")
    test = TestSet.load(work / "prepared", work / "tokenized", cfg.buckets)
    cells = decoded(run)
    if not cells:
        raise DataError(f"{results / RESULTS}: no cell was decoded; nothing to report")
    folders = {cell: work / "translations" / cell for cell in cells}
    for cell, folder in folders.items():
        write_cell(folder, cell, run, results, test, params["prepare"]["tgt_lang"])
    base = (BASELINE, folders[BASELINE]) if BASELINE in folders else None
    evals = {cell: evaluate_cell(cell, folder, test, cfg, base if cell != BASELINE else None)
             for cell, folder in folders.items()}
    with atomic_dir(work / "metrics" / "eval") as tmp:
        for cell, metrics in evals.items():
            write_json(tmp / f"{cell}.json", metrics)
    return evals


def run_table(run: dict[str, Any]) -> Table:
    """What each cell's training and decoding did on the device."""
    rows = []
    beam = run["settings"]["search"]["beam_size"]
    for cell in decoded(run):
        c = run["cells"][cell]
        speed = c["decode"]
        rows.append((cell, fmt(c["steps"]), fmt(c["epochs"]), fmt(c["train_seconds"] / 60, 1),
                     fmt(round(c["tokens_per_s"])), fmt(c["dev_ppl"]), f"{c['parameters']:,}",
                     f"{c['train_pairs']:,}",
                     fmt(speed.get("greedy", {}).get("sentences_per_s"), 1),
                     fmt(speed.get("beam", {}).get("sentences_per_s"), 1)))
    return Table("The run: training and decoding on the device",
                 ("Cell", "Steps", "Epochs", "Training (min)", "Target tokens/s", "Dev ppl",
                  "Parameters", "Training pairs", "Greedy sent/s", f"Beam {beam} sent/s"),
                 tuple(rows))


def fifty_cells(inputs: ReportInputs) -> list[str]:
    """The -50 cells with ``METHOD`` scores, RNNencdec first."""
    return [cell for cell in inputs.ordered_cells()
            if inputs.evals[cell]["model"].get("max_len") == MAX_LEN
            and METHOD in inputs.evals[cell]["systems"]]


def curves(runs: dict[str, ReportInputs]) -> dict[str, dict[str, dict[str, Any]]]:
    """``"RNNsearch-50, <run>"`` -> bucket label -> the ``METHOD`` bucket scores."""
    out = {}
    for run_name, inputs in runs.items():
        for cell in fifty_cells(inputs):
            m = inputs.evals[cell]
            name = display_name(m["model"]["name"], m["model"].get("max_len"))
            by_length = m["systems"][METHOD]["by_length"]
            out[f"{name}, {run_name}"] = {k: v for k, v in by_length.items() if k != "signature"}
    return out


def comparison_table(lines: dict[str, dict[str, dict[str, Any]]], cpu: ReportInputs) -> Table:
    """BLEU by source length, one column per curve (sentences per bucket from the first)."""
    first = next(iter(lines.values()))
    rows = tuple((label, fmt(first[label]["n"]),
                  *(fmt(curve.get(label, {}).get("bleu")) for curve in lines.values()))
                 for label in first)
    counts = [{label: row["n"] for label, row in curve.items()} for curve in lines.values()]
    same = "the same per-bucket counts" if all(c == counts[0] for c in counts) else \
        "DIFFERENT per-bucket counts (not the same sentences)"
    return Table(f"BLEU by source sentence length ({METHOD}): paper width on the GPU, and the "
                 "default CPU run", ("Length", "Sentences", *lines), rows,
                 (f"Both test sets are drawn from the same file with the same seed and length "
                  f"stratification, with {same}. Beam size: the GPU run's own (above); the "
                  f"default run's {cpu_beam()} (params.yaml).",) if cpu.evals else ())


def cpu_beam() -> int:
    """The default run's beam size (``translate.search.beam_size`` of params.yaml)."""
    return read_params(repo_root() / "params.yaml")["translate"]["search"]["beam_size"]


def figure(lines: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    """Figure 2 (BLEU against source length, one line per curve) as a PNG."""
    points = {name: length_curve(curve) for name, curve in lines.items()}
    fig = bleu_by_length_figure(points, f"BLEU by source sentence length ({METHOD})")
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def header(run: dict[str, Any], work: Path) -> list[str]:
    """The page's opening lines: what ran, on what, with which data, for how long."""
    m, s, pack = run["machine"], run["settings"], run["pack"]
    vocab = read_json(work / "metrics" / "tokenize.json")["vocab_size"]
    device = m.get("gpu", m["device"])
    return [
        "# The paper-width curve: RNNsearch-50 and RNNencdec-50 trained on one GPU", "",
        f"Command: `{run['command']}` ({'finished' if run.get('finished') else 'cut short'}, "
        f"{run['seconds'] / 60:.1f} min in all), {m['date']}, on {device} (torch {m['torch']}, "
        f"Lightning {m['lightning']}).", "",
        f"Data: {pack['pairs']['train']:,} Hansard training pairs en->fr "
        f"({pack[f'train_pairs_max{MAX_LEN}']:,} with both sides of at most {MAX_LEN} tokens: the "
        f"-50 cells' training set, {pack[f'train_target_tokens_max{MAX_LEN}']:,} target tokens "
        f"an epoch), vocabularies of {vocab['src']:,} / {vocab['tgt']:,} words, "
        f"{pack['pairs']['test']:,} test sentences; pack sha256 `{pack['sha256']}`.", "",
        f"Training: batch {s['batch_size']}, {s['precision']}{' (TF32 GEMMs)' if s['tf32'] else ''}"
        f"{', CUDA graphs (RNNsearch)' if s.get('cuda_graphs') else ''}, "
        f"{s['optimizer']['optimizer']} lr {s['optimizer']['lr']}, at most "
        f"{s['budget_seconds']['search']:.0f} s (RNNsearch) and {s['budget_seconds']['encdec']:.0f} s "
        f"(RNNencdec) each. Decoding on the device: greedy and beam {s['search']['beam_size']}, "
        f"{s['decode_batch_size']} sentences a batch.", "",
        *graph_lines(run), *missing_lines(run),
        f"![Figure 2: BLEU by source sentence length]({FOLDER}.png)", ""]


def graph_lines(run: dict[str, Any]) -> list[str]:
    """How CUDA graphs went in the cells that used them: shapes captured, capture time, the
    first capture's agreement with the eager loop, or why training fell back to that loop."""
    notes = []
    for cell, info in run["cells"].items():
        if "cuda_graph_shapes" not in info:
            continue
        note = (f"{cell}: {info['cuda_graph_shapes']} shapes captured in "
                f"{info['cuda_graph_capture_seconds']} s")
        if "cuda_graph_check_difference" in info:
            note += (f", the first replayed within {info['cuda_graph_check_difference']:.1e} "
                     f"(relative) of the eager loop")
        if info.get("cuda_graph_error"):
            note += f"; then the eager loop: {info['cuda_graph_error']}"
        notes.append(note)
    return [f"CUDA graphs: {'; '.join(notes)}.", ""] if notes else []


def missing_lines(run: dict[str, Any]) -> list[str]:
    """What the run did not produce, and why (a cell skipped for time or failed in training, a
    decoding method that failed): a paragraph, or nothing when every cell decoded."""
    missing = []
    for cell, info in run["cells"].items():
        if "error" in info or "skipped" in info:
            why = f"training failed: {info['error']}" if "error" in info else info["skipped"]
            missing.append(f"{cell} ({why})")
        missing += [f"{cell} {method} (failed: {row['error']})"
                    for method, row in info.get("decode", {}).items() if "error" in row]
    return [f"Not in the tables: {'; '.join(missing)}.", ""] if missing else []


@contextlib.contextmanager
def unpacked(results: Path) -> Iterator[Path]:
    """``results`` itself when it is a folder; a ``.tar.gz`` of the run's files extracted to a
    temporary folder (regular files only, nothing outside it) for as long as the block runs."""
    if results.is_dir():
        yield results
        return
    with tempfile.TemporaryDirectory(prefix="paper-curve-") as tmp:
        try:
            with tarfile.open(results, "r:gz") as archive:
                archive.extractall(tmp, filter="data")
        except (OSError, EOFError, tarfile.TarError) as err:
            raise DataError(f"{results}: not a results folder or a readable .tar.gz: {err}"
                            ) from err
        yield Path(tmp)


def report(results: Path, work: Path, reports: Path, cpu_metrics: Path) -> list[Path]:
    """Score the run (a folder or its ``.tar.gz``) and write ``<reports>/paper_curve/``;
    returns the files written."""
    with unpacked(results) as folder:
        return _report(folder, work, reports, cpu_metrics)


def _report(results: Path, work: Path, reports: Path, cpu_metrics: Path) -> list[Path]:
    run = read_run(results, work / PACK)
    gpu = ReportInputs(evals=score(run, results, work))
    cpu = ReportInputs.load(cpu_metrics)
    lines = curves({"paper width (GPU)": gpu, "default (CPU)": cpu})
    tables = [run_table(run), build.table1(gpu, METHOD), comparison_table(lines, cpu)]
    gain = build.gain_table(gpu, f"search-{MAX_LEN}", METHOD)
    tables += [gain] if gain is not None else []
    tables.append(build.length_table(gpu, "greedy"))
    target = reports / FOLDER
    with atomic_dir(target) as tmp:
        atomic_write_text(tmp / f"{FOLDER}.md", "\n".join(
            header(run, work) + [t.markdown() for t in tables]))
        atomic_write_text(tmp / f"{FOLDER}.tex", "\n".join(t.latex() for t in tables))
        figure(lines, tmp / f"{FOLDER}.png")
        shutil.copyfile(results / RESULTS, tmp / RESULTS)
    return sorted(target.iterdir())
