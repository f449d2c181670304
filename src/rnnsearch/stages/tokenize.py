"""DVC stage ``tokenize``: prepared text -> Moses tokens + vocabularies (``data/tokenized``).

Tokenises every split and side, builds the vocabularies from the training split, measures
pairs, OOV rates and lengths (``metrics/tokenize.json``) and the length histogram (the DVC plot
``plots/lengths.csv`` and an MLflow figure).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.data.corpora import SPLITS
from rnnsearch.data.meta import read_languages
from rnnsearch.data.textio import read_lines, write_csv, write_lines
from rnnsearch.data.tokenize import (count_words, length_histogram, length_stats, oov_rate,
                                     tokenize_lines)
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.stages.runner import Stage, StageContext

SIDES = ("src", "tgt")


def tokenize_splits(cfg: TokenizeConfig, prepared: Path, out: Path) -> dict[str, dict[str, list[str]]]:
    """Tokenise every split and side of ``prepared`` into ``out``; returns the token lines."""
    langs = read_languages(prepared / "meta.json")
    tokens: dict[str, dict[str, list[str]]] = {}
    for split in SPLITS:
        tokens[split] = {}
        for side in SIDES:
            lines = read_lines(prepared / f"{split}.{side}")
            tokens[split][side] = tokenize_lines(lines, langs[side], cfg.lowercase, cfg.workers,
                                                 desc=f"tokenize {split}.{side} ({langs[side]})")
            write_lines(out / f"{split}.{side}", tokens[split][side])
    return tokens


def build_vocabularies(cfg: TokenizeConfig, train: dict[str, list[str]], out: Path
                       ) -> dict[str, Vocabulary]:
    """The N most frequent training words per side, saved as ``vocab.<side>.txt``."""
    sizes = {"src": cfg.vocab_size_src, "tgt": cfg.vocab_size_tgt}
    vocabs = {}
    for side in SIDES:
        vocabs[side] = Vocabulary.build(count_words(train[side]), sizes[side], cfg.min_count)
        vocabs[side].save(out / f"vocab.{side}.txt")
    return vocabs


def corpus_metrics(tokens: dict[str, dict[str, list[str]]], vocabs: dict[str, Vocabulary]
                   ) -> dict[str, Any]:
    """Pairs per split, vocabulary sizes, OOV token rates and length percentiles."""
    return {
        "pairs": {split: len(sides["src"]) for split, sides in tokens.items()},
        "vocab_size": {side: len(vocab) for side, vocab in vocabs.items()},
        "oov_rate": {split: {side: round(oov_rate(lines, vocabs[side]), 5)
                             for side, lines in sides.items()}
                     for split, sides in tokens.items()},
        "length": {split: {side: length_stats(lines) for side, lines in sides.items()}
                   for split, sides in tokens.items()},
    }


def length_rows(train: dict[str, list[str]]) -> list[dict[str, int]]:
    """Rows ``{length, train_src, train_tgt}`` of the training length histogram."""
    hists = {side: length_histogram(lines) for side, lines in train.items()}
    longest = max(max(h) for h in hists.values())
    return [{"length": n, **{f"train_{side}": hists[side].get(n, 0) for side in SIDES}}
            for n in range(0, longest + 1)]


def length_figure(rows: list[dict[str, int]]):
    """A matplotlib figure of the training length histogram, one bar series per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    lengths = [r["length"] for r in rows]
    for side, offset in zip(SIDES, (-0.2, 0.2)):
        ax.bar([n + offset for n in lengths], [r[f"train_{side}"] for r in rows], width=0.4,
               label=side)
    ax.set_xlabel("sentence length (tokens)")
    ax.set_ylabel("training sentences")
    ax.set_title("Training sentence lengths")
    ax.legend()
    fig.tight_layout()
    return fig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    parser.add_argument("--out", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/tokenize.json"))
    parser.add_argument("--plot", type=Path, default=Path("plots/lengths.csv"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Tokenise into ``args.out`` (atomically), then metrics, the plot and the MLflow run."""
    start = time.perf_counter()
    cfg = ctx.section(TokenizeConfig)
    with ctx.output_dir(args.out) as tmp:
        tokens = tokenize_splits(cfg, args.prepared, tmp)
        vocabs = build_vocabularies(cfg, tokens["train"], tmp)
    metrics = corpus_metrics(tokens, vocabs)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    rows = length_rows(tokens["train"])
    ctx.write_metrics(args.metrics, metrics)
    write_csv(args.plot, rows)
    print(f"tokenize: {metrics['pairs']} pairs, vocab {metrics['vocab_size']}, "
          f"OOV {metrics['oov_rate']}, {metrics['seconds']} s")
    with ctx.mlflow_run(cfg):
        import mlflow

        tracking.log_numeric_metrics(metrics)
        mlflow.log_figure(length_figure(rows), "length_histogram.png")
        mlflow.log_artifact(str(args.plot))


STAGE = Stage("tokenize", __doc__, add_arguments,
              lambda a: [a.out, a.metrics, a.plot], body)
