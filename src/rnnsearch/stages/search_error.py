"""DVC stage ``search_error`` (one grid cell, ``--cell search-50``): how often the beam of
``translate.search`` misses what the cell's own model prefers, and how often the model prefers a
wrong output (Stahlberg & Byrne 2019; :mod:`rnnsearch.decoding.search_error`), on the first
``evaluate.search_error_sentences`` test sentences. Writes ``metrics/search_error/<cell>.json``
and logs the shares to MLflow (run ``search_error-<cell>``)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config.evaluate import SEARCH_ERROR_SHARES as SHARES, EvaluateConfig
from rnnsearch.config.translate import TranslateConfig, resolve_device
from rnnsearch.decoding.search_error import paired_lines, search_errors
from rnnsearch.decoding.translator import Translator
from rnnsearch.stages.runner import Stage, StageContext


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cell", required=True, help="grid cell, e.g. search-50")
    parser.add_argument("--models", type=Path, default=Path("data/models"))
    parser.add_argument("--tokenized", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/search_error"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Decode the cell's first test sentences with the beam and the wide beam, force-decode
    their references, write and log the shares of each kind of error."""
    cfg = ctx.section(TranslateConfig, "translate")
    evaluate = ctx.section(EvaluateConfig, "evaluate")
    device = resolve_device(cfg.device)
    translator = Translator.load(args.models / args.cell / "model.pt", args.tokenized,
                                 cfg.source_eos, device)
    sources, references = paired_lines(args.tokenized / "test.src", args.tokenized / "test.tgt",
                                       evaluate.search_error_sentences)
    figures = search_errors(translator, sources, references, cfg.search,
                            evaluate.search_error_wide_beam, cfg.batch_size_for(device))
    ctx.write_metrics(args.metrics / f"{args.cell}.json", {"cell": args.cell, **figures})
    print(f"search_error {args.cell}: " + ", ".join(f"{name} {figures[name]:.3f}"
                                                    for name in SHARES))
    settings = {name: value for name, value in figures.items() if name not in SHARES}
    with ctx.mlflow_run(settings, run_name=f"search_error-{args.cell}", tags={"cell": args.cell}):
        tracking.log_numeric_metrics({name: figures[name] for name in SHARES}, "search_error/")


STAGE = Stage("search_error", __doc__, add_arguments,
              lambda a: [a.metrics / f"{a.cell}.json"], body)
