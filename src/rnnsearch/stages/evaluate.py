"""DVC stage ``evaluate``: BLEU/chrF of every grid cell's translations (all, no-UNK, by source
length), paired bootstrap against the no-attention baseline, unigram F1 by training frequency,
the BLEU-by-length plots and one MLflow run per cell. One stage for the whole grid, since a
cell's significance test reads its baseline's translations (:func:`evaluate_cell`)."""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from rnnsearch.config.base import from_dict, read_params, required_section
from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.config.replicates import ReplicatesConfig
from rnnsearch.config.train import GridConfig, TrainConfig
from rnnsearch.data.textio import read_json, read_lines, write_csv
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.evaluation.cell import (TestSet, evaluate_cell, read_system,
                                       source_lengths)
from rnnsearch.evaluation.replicates import system_spread, system_test
from rnnsearch.evaluation.rare_words import CLASSES, TrainingWords, unit_words
from rnnsearch.evaluation.subsets import MIN_FILLED_BUCKETS, derived_edges, length_buckets
from rnnsearch.reporting.figures import (bleu_by_length_figure, f1_by_rank_figure, length_curve,
                                         length_plot_rows)
from rnnsearch.reporting.tables import bucket_words
from rnnsearch.reporting.rare_words import rank_curve
from rnnsearch.stages.runner import Stage, StageContext
from rnnsearch.tracking import replicate_cell, split_replicate

REPLICATES = "replicates"       # metrics/eval/replicates/: each replicate's metrics, the summary
SUMMARY = "summary.json"


def read_grid(params_path: str) -> GridConfig:
    """The ``train.grid`` section (which cells exist)."""
    train = required_section(read_params(params_path), "train", params_path)
    return from_dict(GridConfig, train.get("grid", {}), "train.grid")


def read_first_seed(params_path: str) -> int:
    """``train.seed``: the seed of every grid cell's own run, its first replicate."""
    train = required_section(read_params(params_path), "train", params_path)
    return from_dict(TrainConfig, train, "train").seed


def read_tokenize(params_path: str) -> TokenizeConfig:
    """The ``tokenize`` section (the units and the word-level vocabulary's size)."""
    return from_dict(TokenizeConfig,
                     required_section(read_params(params_path), "tokenize", params_path), "tokenize")


def read_training_words(tok: TokenizeConfig, tokenized: Path, cfg: EvaluateConfig
                        ) -> TrainingWords:
    """``tokenized/train.tgt``'s words (subword pieces joined), ranked; a word vocabulary of
    ``evaluate.word_vocab_size`` or ``tokenize.vocab_size_tgt``, with ``tokenize.min_count``."""
    lines = read_lines(tokenized / "train.tgt")
    return TrainingWords.count((unit_words(line, tok.subwords) for line in lines),
                               cfg.word_vocab_size or tok.vocab_size_tgt, tok.min_count)


def read_word_vocabularies(tok: TokenizeConfig, tokenized: Path, cfg: EvaluateConfig
                           ) -> tuple[Vocabulary, Vocabulary] | None:
    """With subword units: the (source, target) vocabularies a word model of this run's sizes
    would have, which define the ``no_unk_words`` subset; None with word units."""
    if not tok.subwords:
        return None
    sizes = {"src": tok.vocab_size_src, "tgt": tok.vocab_size_tgt}

    def build(side: str) -> Vocabulary:
        counts = Counter(word for line in read_lines(tokenized / f"train.{side}")
                         for word in unit_words(line, subwords=True))
        return Vocabulary.build(counts, cfg.word_vocab_size or sizes[side], tok.min_count)

    return build("src"), build("tgt")


def log_cell(cell: str, metrics: dict[str, Any], cfg: EvaluateConfig, metrics_path: Path,
             ctx: StageContext) -> None:
    """The cell's MLflow run: scores, p-values, BLEU by length (step: bucket top edge), figures."""
    import mlflow

    with ctx.mlflow_run(cfg, run_name=f"evaluate-{cell}", tags={"cell": cell}):
        for name, system in metrics["systems"].items():
            for subset in ("all", "no_unk", "no_unk_words"):
                for score in ("bleu", "chrf"):
                    if system.get(subset, {}).get(score) is not None:
                        mlflow.log_metric(f"{name}/{subset}/{score}", system[subset][score])
            for step, _, bleu, _ in length_curve(system["by_length"], cfg.min_bucket_sentences):
                if bleu is not None:
                    mlflow.log_metric(f"{name}/bleu_by_length", bleu, step=step)
            for key, p_value in baseline_p_values(system).items():
                mlflow.log_metric(f"{name}/{key}", p_value)
            for key, value, step in unigram_f1_points(system):
                mlflow.log_metric(f"{name}/{key}", value, step=step)
        for method, row in metrics["speed"].items():
            mlflow.log_metric(f"speed/{method}/sentences_per_s", row["sentences_per_s"])
        curves = {name: length_curve(s["by_length"], cfg.min_bucket_sentences)
                  for name, s in metrics["systems"].items()}
        mlflow.log_figure(bleu_by_length_figure(curves, f"BLEU by source length: {cell}",
                                                cfg.min_bucket_sentences), "bleu_by_length.png")
        if "training_words" in metrics:
            f1_curves = {name: rank_curve(s["unigram_f1"]) for name, s in metrics["systems"].items()
                         if "unigram_f1" in s}
            mlflow.log_figure(f1_by_rank_figure(f1_curves,
                                                metrics["training_words"]["vocabulary_words"],
                                                f"Unigram F1 by training frequency rank: {cell}"),
                              "unigram_f1_by_rank.png")
        mlflow.log_artifact(str(metrics_path))


def baseline_p_values(system: dict[str, Any]) -> dict[str, float]:
    """p-values vs the baseline by MLflow name, ``p_value_vs_baseline`` (all sentences) and
    ``p_value_vs_baseline_no_unk`` (no-UNK subset), each where tested (none for the baseline)."""
    vs = system.get("vs_baseline", {})
    found = {"p_value_vs_baseline": vs.get("all", {}).get("p_value"),
             "p_value_vs_baseline_no_unk": vs.get("no_unk", {}).get("p_value")}
    return {key: p for key, p in found.items() if p is not None}


def unigram_f1_points(system: dict[str, Any]) -> list[tuple[str, float, int]]:
    """``(name, value, step)`` for MLflow: ``unigram_f1/<class>`` (step 0), ``unigram_f1_by_rank``
    (step: the rank bin's highest rank); points without tokens (F1 None) left out."""
    f1 = system.get("unigram_f1")
    if f1 is None:
        return []
    points = [(f"unigram_f1/{name}", f1[name]["f1"], 0) for name in CLASSES]
    points += [("unigram_f1_by_rank", row["f1"], row["step"]) for row in f1["by_rank"].values()]
    return [point for point in points if point[1] is not None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cells", nargs="*", help="default: every cell of train.grid (the "
                        "metrics and plots folders then hold these cells only)")
    parser.add_argument("--translations", type=Path, default=Path("data/translations"))
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    parser.add_argument("--tokenized", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/eval"))
    parser.add_argument("--plots", type=Path, default=Path("plots/bleu_by_length"))


def evaluate_cells(args: argparse.Namespace, cfg: EvaluateConfig, cells: list[str]
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, TestSet]]:
    """Every cell's metrics (tested against :func:`baseline_of`) and its test set."""
    tok = read_tokenize(args.params)
    training = read_training_words(tok, args.tokenized, cfg)
    word_vocabs = read_word_vocabularies(tok, args.tokenized, cfg)
    decoded = {cell: read_json(args.translations / cell / "meta.json").get("sentences")
               for cell in cells}
    edges = bucket_edges(args.prepared, cfg, decoded.values())
    results, tests = {}, {}
    for cell in cells:
        folder = args.translations / cell
        test = tests[cell] = TestSet.load(args.prepared, args.tokenized, edges, decoded[cell],
                                          subwords=tok.subwords, word_vocabs=word_vocabs)
        base = baseline_of(cell, cfg.baseline)
        baseline = (base, args.translations / base) if base in cells and base != cell else None
        results[cell] = evaluate_cell(cell, folder, test, cfg, baseline, training)
    return results, tests


def replicate_summary(args: argparse.Namespace, cfg: EvaluateConfig,
                      systems: dict[str, list[str]], results: dict[str, dict[str, Any]],
                      tests: dict[str, TestSet], seeds: list[int]) -> dict[str, Any]:
    """``metrics/eval/replicates/summary.json``: per system (a grid cell and its replicates) and
    method, mean, sample sd, n and per-seed BLEU (all, no UNK, by length), and the replicate-aware
    paired bootstrap vs the baseline's replicates. ``seeds``: ``train.seed``, then replicates'."""
    summary: dict[str, Any] = {"seeds": seeds, "systems": {}}
    for system, cells in systems.items():
        base = baseline_of(system, cfg.baseline)
        entry: dict[str, Any] = {"cells": cells, "baseline": base if base != system and
                                 base in systems else None, "methods": {}}
        for method in results[system]["systems"]:
            scores = system_spread([results[cell] for cell in cells], method)
            if entry["baseline"] is not None and cfg.bootstrap_samples > 0:
                test = tests[system]
                hyps = [read_system(args.translations / cell, method, test) for cell in cells]
                base_hyps = [read_system(args.translations / cell, method.removesuffix("_unk"),
                                         test) for cell in systems[base]]
                scores["vs_baseline"] = system_test(hyps, base_hyps, test, cfg)
            entry["methods"][method] = scores
        summary["systems"][system] = entry
    return summary


def baseline_of(cell: str, baseline: str) -> str:
    """The cell ``cell`` is tested against: the baseline at its maximum length; for a replicate,
    the baseline's of the same seed (``search-50-seed2`` against ``encdec-50-seed2``)."""
    system, seed = split_replicate(cell)
    base = f"{baseline}-{system.rpartition('-')[2]}"
    return base if seed is None else replicate_cell(base, seed)


def bucket_edges(prepared: Path, cfg: EvaluateConfig, decoded: Iterable[int | None]
                 ) -> tuple[int, ...]:
    """``evaluate.buckets``, or edges derived from the test sources' lengths (said in one line) when
    those leave under :data:`MIN_FILLED_BUCKETS` buckets of ``evaluate.min_bucket_sentences``; one
    set for every cell, on the sentences all cells decoded (``decoded``: counts, None: all)."""
    limit = min((n for n in decoded if n is not None), default=None)
    lengths = source_lengths(prepared, limit)
    derived = derived_edges(lengths, cfg.buckets, cfg.min_bucket_sentences)
    if derived is None:
        return tuple(cfg.buckets)
    used = ", ".join(f"{bucket_words(b.label)} ({len(b.indices)})"
                     for b in length_buckets(lengths, derived))
    print(f"evaluate: evaluate.buckets {list(cfg.buckets)} leave fewer than "
          f"{MIN_FILLED_BUCKETS} length buckets of at least {cfg.min_bucket_sentences} test "
          f"sentences (evaluate.min_bucket_sentences); using buckets derived from the test "
          f"sources' lengths instead: {used} (edges {list(derived)}; set evaluate.buckets to "
          "choose others)")
    return derived


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Score every cell (all before writing anything), then write metrics, plots, MLflow runs."""
    cfg = ctx.section(EvaluateConfig)
    grid = read_grid(args.params)     # evaluate.baseline was checked against it on load
    cells = args.cells or [f"{model}-{n}" for model in grid.models for n in grid.max_lens]
    seeds = ctx.section(ReplicatesConfig, "replicates").seeds
    systems = {cell: [cell] + [replicate_cell(cell, seed) for seed in seeds] for cell in cells}
    results, tests = evaluate_cells(args, cfg, [cell for group in systems.values()
                                                for cell in group])
    summary = replicate_summary(args, cfg, systems, results, tests,
                                [read_first_seed(args.params), *seeds]) if seeds else None
    # Both folders are replaced whole, so no file of an earlier grid reaches this grid's tables.
    with ctx.output_dir(args.metrics) as metrics_dir, ctx.output_dir(args.plots) as plots_dir:
        for cell, metrics in results.items():
            if cell in systems:
                ctx.write_metrics(metrics_dir / f"{cell}.json", metrics)
                rows = length_plot_rows(metrics["systems"], cfg.min_bucket_sentences)
                if rows:                # else no bucket holds evaluate.min_bucket_sentences
                    write_csv(plots_dir / f"{cell}.csv", rows)
            else:               # a replicate: metrics/eval/replicates/<cell>-seed<seed>.json
                ctx.write_metrics(metrics_dir / REPLICATES / f"{cell}.json", metrics)
        if summary is not None:
            ctx.write_json(metrics_dir / REPLICATES / SUMMARY, summary)
    for cell, metrics in results.items():
        for name, system in metrics["systems"].items():
            print(f"evaluate {cell} {name}: {summary_line(system)}")
        folder = args.metrics if cell in systems else args.metrics / REPLICATES
        log_cell(cell, metrics, cfg, folder / f"{cell}.json", ctx)


def summary_line(system: dict[str, Any]) -> str:
    """BLEU on all sentences, on those without an unknown word (the paper's "No UNK": fewer
    sentences, same output) and with ``<unk>`` deleted (all sentences, another output), each named
    so neither is taken for the other; an empty subset or word class is said so, not shown None."""
    line = (f"BLEU {system['all']['bleu']} on all {system['all']['n']} sentences | "
            + subset_clause(system["no_unk"], "with no unknown word"))
    if "no_unk_words" in system:
        line += " | " + subset_clause(system["no_unk_words"],
                                      "with no word outside word-level vocabularies")
    if "unk_removed" in system:
        line += f" | {system['unk_removed']['bleu']} with <unk> deleted from the output"
    f1 = system.get("unigram_f1")
    if f1 is not None:
        line += " | " + f1_clause(f1)
    p_values = baseline_p_values(system)
    if p_values:
        no_unk = p_values.get("p_value_vs_baseline_no_unk")
        line += (f" | p = {p_values.get('p_value_vs_baseline')}"
                 + (f" (no unknown word: {no_unk})" if no_unk is not None else "")
                 + f" vs {system['vs_baseline']['baseline']}")
    return line


def subset_clause(row: dict[str, Any], which: str) -> str:
    """``<BLEU> on the <n> <which>``, or ``no sentence <which>`` for an empty subset."""
    return f"{row['bleu']} on the {row['n']} {which}" if row["n"] else f"no sentence {which}"


# unigram F1's classes in the summary line: (what follows the F1, the class's words)
F1_CLAUSES = {"in_vocabulary": ("on words in the vocabulary", "word in the vocabulary"),
              "rare": ("rare", "rare word"), "unseen": ("unseen", "unseen word")}


def f1_clause(f1: dict[str, Any]) -> str:
    """``unigram F1 <in vocabulary> on words in the vocabulary, <rare> rare, <unseen> unseen``;
    a class with no token in the output nor the references (F1 None) named as absent."""
    shown = [f"{f1[name]['f1']} {said}" for name, (said, _) in F1_CLAUSES.items()
             if f1[name]["f1"] is not None]
    absent = [words for name, (_, words) in F1_CLAUSES.items() if f1[name]["f1"] is None]
    note = f"no {' and no '.join(absent)} in the output or the references" if absent else ""
    if not shown:
        return f"unigram F1: {note}"
    return f"unigram F1 {', '.join(shown)}" + (f" ({note})" if note else "")


STAGE = Stage("evaluate", __doc__, add_arguments, lambda a: [a.metrics, a.plots], body)
