"""DVC stage ``report``: the papers' tables and figures under ``reports/`` from metrics files
only, the headline numbers of ``dvc metrics show`` (``metrics/summary/``,
:mod:`rnnsearch.reporting.summary`), and the same files in one MLflow run named "report"."""
from __future__ import annotations

import argparse
from pathlib import Path

from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.config.report import ReportConfig
from rnnsearch.config.train import TrainConfig
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.write import RESULTS, regenerate_line, write_report
from rnnsearch.reporting.summary import SUMMARY, write_summaries
from rnnsearch.stages.runner import Stage, StageContext


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics", type=Path, default=Path("metrics"))
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    parser.add_argument("--no-mlflow", action="store_true", help="write the files only")


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Read the metrics, write the tables and figures, log them as artifacts."""
    cfg = ctx.section(ReportConfig)
    min_sentences = ctx.section(EvaluateConfig, "evaluate").min_bucket_sentences
    inputs = ReportInputs.load(args.metrics)
    written = write_report(inputs, cfg, args.reports, min_sentences,
                           regenerate_line(args.params, args.metrics, args.reports),
                           ctx.section(TrainConfig, "train").budget)
    summary = write_summaries(inputs, cfg.method, args.metrics)
    print(f"report: {len(inputs.evals)} cells, {len(written)} files under {args.reports}/, "
          f"headline numbers in {summary}/")
    if not args.no_mlflow:
        import mlflow

        with ctx.mlflow_run(cfg, run_name="report"):
            for path in written:
                mlflow.log_artifact(str(path), artifact_path="report")


STAGE = Stage("report", __doc__, add_arguments,
              lambda a: [a.reports / RESULTS, a.reports / "README.md", a.metrics / SUMMARY], body)
