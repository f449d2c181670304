"""DVC stage ``align_attention``: attention as alignment, scored against the human links.

Every attention model force-decodes the gold sentences of ``data/align/gold.json``; weights
become links by ``argmax`` and by ``align.attention_threshold``, scored (AER, precision, recall)
into ``metrics/align_attention.json`` with ``align.figure_sentence``'s weights. Subword weights
become word-to-word ones first (:func:`rnnsearch.alignment.attention.word_attention`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from rnnsearch.alignment.attention import WORD_UNITS, variant_links, word_matrices
from rnnsearch.alignment.corpus import GoldCorpus
from rnnsearch.config.align import AlignConfig
from rnnsearch.config.sections import grid_cells
from rnnsearch.config.train import TrainConfig
from rnnsearch.data.meta import read_languages
from rnnsearch.data.subword import TextUnits
from rnnsearch.data.textio import read_json
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.stages.runner import Stage, StageContext
from rnnsearch.errors import StageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", type=Path, default=Path("data/align/gold.json"))
    parser.add_argument("--models", type=Path, default=Path("data/models"))
    parser.add_argument("--tokenized", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--meta", type=Path, default=Path("data/prepared/meta.json"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/align_attention.json"))


def score_cell(model: Any, gold: GoldCorpus, vocabs: dict[str, Vocabulary], source: str,
               cfg: AlignConfig, units: TextUnits = WORD_UNITS) -> dict[str, Any]:
    """Scores of both link variants and the figure sentence's weights for one model."""
    matrices = word_matrices(model, gold, vocabs, source, units, cfg.batch_size)
    links = variant_links(matrices, source, cfg.attention_threshold)
    return {"scores": {name: gold.score(found) for name, found in links.items()},
            "figure": figure_record(gold, matrices, source, cfg.figure_sentence)}


def check_figure_sentence(gold: GoldCorpus, ident: str | None, path: Path) -> None:
    """``align.figure_sentence`` is null or one of the gold sentences of ``path``."""
    idents = [pair.ident for pair in gold.pairs]
    if ident is not None and ident not in idents:
        raise StageError(f"align.figure_sentence: {path} has no sentence '{ident}' (its ids: "
                         f"{idents[0]} ... {idents[-1]}; null draws no overlay)")


def figure_record(gold: GoldCorpus, matrices: list[np.ndarray], source: str, ident: str | None
                  ) -> dict[str, Any] | None:
    """``ident``'s words, weights (target x source) and gold links for the overlay, or None."""
    index = next((k for k, p in enumerate(gold.pairs) if p.ident == ident), None)
    if index is None:
        return None
    flip = source == "fr"
    links = {kind: [[j, i] if not flip else [i, j] for i, j in gold.pipeline_links(index, kind)]
             for kind in ("sure", "possible")}                          # [target, source]
    return {"id": ident, "source": list(getattr(gold, source)[index].tokens),
            "target": list(getattr(gold, "fr" if source == "en" else "en")[index].tokens),
            "weights": np.round(matrices[index], 3).tolist(), **links}


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Score every attention cell of the grid; write the metrics and one MLflow run."""
    from rnnsearch.models.seq2seq import load_model

    cfg = ctx.section(AlignConfig, "align")
    train = ctx.section(TrainConfig, "train")
    cells = grid_cells(train)
    langs = read_languages(args.meta)
    if not args.gold.is_file():
        raise StageError(f"{args.gold}: not found: run the align stage first")
    gold = GoldCorpus.from_records(read_json(args.gold))
    if not gold.pairs:
        ctx.write_metrics(args.metrics, {"gold": f"no gold alignments for {langs['src']}-"
                                                 f"{langs['tgt']} (only English-French)"})
        print(f"align_attention: no gold alignments for {langs['src']}-{langs['tgt']}")
        return
    check_figure_sentence(gold, cfg.figure_sentence, args.gold)
    vocabs = {side: Vocabulary.load(args.tokenized / f"vocab.{side}.txt") for side in ("src", "tgt")}
    units = TextUnits.read(args.tokenized)      # a subword model missing or stale fails here
    metrics: dict[str, Any] = {"sentences": len(gold.pairs), "threshold": cfg.attention_threshold,
                               "cells": {}}
    for cell in cells:
        if not train.model_config(cell.rpartition("-")[0]).architecture.attention:
            metrics["cells"][cell] = {"attention": False}      # nothing to read: not loaded
            continue
        model = load_model(args.models / cell / "model.pt")
        metrics["cells"][cell] = {"attention": True,
                                  **score_cell(model, gold, vocabs, langs["src"], cfg, units)}
        for variant, scores in metrics["cells"][cell]["scores"].items():
            print(f"align_attention {cell} {variant}: AER {scores['aer']:.3f} precision "
                  f"{scores['precision']:.3f} recall {scores['recall']:.3f}")
    ctx.write_metrics(args.metrics, metrics)
    log_metrics(ctx, cfg, metrics)


def log_metrics(ctx: StageContext, cfg: AlignConfig, metrics: dict[str, Any]) -> None:
    """Every cell's AER, precision and recall per link variant."""
    import mlflow

    with ctx.mlflow_run(cfg):
        for cell, entry in metrics["cells"].items():
            for variant, scores in entry.get("scores", {}).items():
                for score in ("aer", "precision", "recall"):
                    mlflow.log_metric(f"{cell}/{variant.split()[0]}/{score}", scores[score])


STAGE = Stage("align_attention", __doc__, add_arguments, lambda a: [a.metrics], body)
