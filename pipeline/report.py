"""DVC stage `report`: the papers' tables and figures under reports/, from metrics files only
(metrics/eval, metrics/alignments, metrics/train, metrics/embed.json, metrics/lm.json), and the
same files in one MLflow run named "report"."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.report import ReportConfig
from rnnsearch.reporting import ReportInputs, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--metrics", type=Path, default=Path("metrics"))
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    parser.add_argument("--no-mlflow", action="store_true", help="write the files only")
    args = parser.parse_args(argv)
    try:
        cfg = load_section(ReportConfig, "report", args.params)
        inputs = ReportInputs.load(args.metrics)
    except (ConfigError, ValueError, KeyError) as err:
        print(f"report: error: {err}", file=sys.stderr)
        return 2
    written = write_report(inputs, cfg, args.reports)
    print(f"report: {len(inputs.evals)} cells, {len(written)} files under {args.reports}/")
    if not args.no_mlflow:
        import mlflow

        with tracking.start_run("report", cfg, run_name="report"):
            for path in written:
                mlflow.log_artifact(str(path), artifact_path="report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
