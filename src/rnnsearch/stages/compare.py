"""DVC stage ``compare@<preset>-vs-<other>`` (reports/presets/dvc.yaml): an exported preset beside
the default run or another preset (:mod:`rnnsearch.runs.comparison`): paired bootstraps of both
runs' committed translations into ``significance*.json``, then ``beside_<other>.{md,tex,png}``.
Its code record holds only the comparison's modules: a presets tool or decoder edit stales none."""
from __future__ import annotations

import argparse
from pathlib import Path

from rnnsearch.config.repository import check_name
from rnnsearch.reporting.beside import significance_file
from rnnsearch.runs.branches import export_folder
from rnnsearch.runs.comparison import tested_comparison
from rnnsearch.stages.runner import Stage, StageContext

DEFAULT = "default"   # --against: the workspace's default run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, help="an exported preset "
                                                        "(reports/presets/<name>/)")
    parser.add_argument("--against", default=DEFAULT,
                        help="an exported preset, or default: the workspace's default run")


def outputs(args: argparse.Namespace) -> list[Path]:
    """The significance file and the beside page's three files in the preset's folder."""
    folder = export_folder(check_name(args.preset))
    return [folder / significance_file(args.against), *(folder / f"beside_{args.against}.{ext}"
                              for ext in ("md", "tex", "png"))]


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Both tests, then the page; a bootstrap that cannot be made fails the stage."""
    against = None if args.against == DEFAULT else check_name(args.against)
    tested_comparison(args.preset, export_folder(args.preset), against, strict=True)


STAGE = Stage("compare", __doc__, add_arguments, outputs, body)
