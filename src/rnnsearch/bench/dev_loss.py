"""Dev-loss curves of train-stage runs side by side: does a faster setting learn the same?

    python -m rnnsearch.bench.dev_loss --run fp32 data/models/search-50 \\
        --run bf16 exp/search-50 --out reports/bf16_dev_loss

Each ``--run LABEL DIR [STORE]`` is a cell the train stage trained: ``DIR`` is its output folder
(``run.json`` names its MLflow run), ``STORE`` the MLflow store it logged to (an ``mlflow.db``
path or a tracking URI; default: this repository's store). The command reads every run's
``val/loss`` history (the dev loss at every ``train.budget.val_every_steps``), and writes
``<out>.md`` (a table of the dev loss at every validated step, each run's relative difference to
the first run's), ``<out>.json`` and ``<out>.png`` (the curves). ``--tolerance`` (default 1%)
is the largest relative difference at the last common step that it calls "the same"; the
verdict is in the report, and the exit status is 0 either way (a comparison, not a test).

Typical use: train one default cell in fp32 (the committed run) and once more with the setting
to check (``dvc exp run -S train.trainer.precision=bf16-mixed -S
train.trainer.bf16_cross_entropy=true``), then compare the two (docs/performance.md).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rnnsearch.bench.table import markdown_table
from rnnsearch.command import entry_point
from rnnsearch.data.textio import atomic_write_text, write_json
from rnnsearch.errors import StageError

DEV_LOSS = "val/loss"


def store_uri(store: str | None) -> str:
    """A tracking URI for ``store`` (an ``mlflow.db`` path or a URI); None: the project's."""
    from rnnsearch.tracking import tracking_uri

    if store is None:
        return tracking_uri()
    if "://" in store:
        return store
    if not Path(store).is_file():     # MLflow would create an empty one
        raise StageError(f"{store}: no MLflow store there")
    return f"sqlite:///{Path(store).resolve()}"


@dataclass(frozen=True)
class TrainRun:
    """What the comparison reads of one train-stage run."""

    run_id: str
    dev_loss: dict[int, float]     # {step: dev loss}
    params: dict[str, str]         # the run's MLflow params (its train settings)


def read_run(run_dir: Path, store: str | None) -> TrainRun:
    """The train-stage run whose output folder is ``run_dir``, from its MLflow store."""
    import mlflow

    run_file = run_dir / "run.json"
    try:
        run_id = json.loads(run_file.read_text(encoding="utf-8"))["mlflow_run_id"]
    except (OSError, ValueError, KeyError) as err:
        raise StageError(f"{run_file}: no MLflow run id of a train-stage run ({err})") from err
    client = mlflow.MlflowClient(store_uri(store))
    history = client.get_metric_history(run_id, DEV_LOSS)
    if not history:
        raise StageError(f"{run_dir}: MLflow run {run_id} in {store_uri(store)} has no "
                         f"{DEV_LOSS!r} history")
    curve = {m.step: m.value for m in sorted(history, key=lambda m: (m.step, m.timestamp))}
    return TrainRun(run_id, curve, dict(client.get_run(run_id).data.params))


def differing_params(runs: dict[str, TrainRun]) -> dict[str, dict[str, str | None]]:
    """``{param: {label: value or None}}`` for the params whose values differ between runs."""
    names = sorted(set().union(*(run.params for run in runs.values())))
    values = {name: {label: run.params.get(name) for label, run in runs.items()} for name in names}
    return {name: by_run for name, by_run in values.items() if len(set(by_run.values())) > 1}


def compare(curves: dict[str, dict[int, float]], tolerance: float) -> dict[str, Any]:
    """Per run: its curve (``{step: dev loss}``) and its relative difference to the first
    run's at the steps both validated; the verdict at the last such step."""
    reference_label, reference = next(iter(curves.items()))
    runs = {}
    for label, curve in curves.items():
        common = sorted(set(curve) & set(reference))
        if not common:
            raise StageError(f"run {label!r} and run {reference_label!r} share no validated step")
        difference = {step: curve[step] / reference[step] - 1 for step in common}
        last = common[-1]
        runs[label] = {"dev_loss": curve, "relative_difference": difference, "last_step": last,
                       "within_tolerance": abs(difference[last]) <= tolerance}
    return {"reference": reference_label, "tolerance": tolerance, "runs": runs}


def markdown(result: dict[str, Any], sources: dict[str, str],
             settings: dict[str, dict[str, str | None]]) -> str:
    """The comparison as a Markdown report."""
    runs, reference = result["runs"], result["reference"]
    steps = sorted(runs[reference]["dev_loss"])
    header = ["step"] + [f"{label} dev loss" for label in runs] + [
        f"{label} vs {reference}" for label in runs if label != reference]
    rows = []
    for step in steps:
        row = [f"{step:,}"] + [_number(runs[label]["dev_loss"].get(step), ".4f") for label in runs]
        row += [_number(runs[label]["relative_difference"].get(step), "+.2%")
                for label in runs if label != reference]
        rows.append(row)
    verdicts = [f"- {label}: {_verdict(run, reference, result['tolerance'])}"
                for label, run in runs.items() if label != reference]
    labels = list(runs)
    setting_rows = [[f"`{name}`", *[_value(by_run[label]) for label in labels]]
                    for name, by_run in settings.items()]
    lines = ["# Dev loss side by side", "",
             "Dev loss (mean token cross-entropy over the dev set, taken in fp32 over each run's "
             "own logits) at every validation of each run, and each run's relative difference "
             "to the first run's.", "",
             *[f"- {label}: {source}" for label, source in sources.items()], "",
             "Settings that differ (the runs' MLflow params):", "",
             *markdown_table(["param", *labels], setting_rows), "",
             *markdown_table(header, rows), "", *verdicts, ""]
    return "\n".join(lines)


def _value(value: str | None) -> str:
    return "(not set)" if value is None else f"`{value}`"


def _verdict(run: dict[str, Any], reference: str, tolerance: float) -> str:
    step, difference = run["last_step"], run["relative_difference"][run["last_step"]]
    same = "within" if run["within_tolerance"] else "**outside**"
    return (f"at step {step:,}, {difference:+.2%} against {reference}'s dev loss: {same} "
            f"{tolerance:.0%}")


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def write(result: dict[str, Any], sources: dict[str, str],
          settings: dict[str, dict[str, str | None]], out: Path) -> list[Path]:
    """``<out>.md``, ``<out>.json`` and ``<out>.png``."""
    from rnnsearch.reporting.figures import dev_loss_figure

    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".md"), out.with_suffix(".json"), out.with_suffix(".png")]
    atomic_write_text(paths[0], markdown(result, sources, settings))
    write_json(paths[1], {**result, "sources": sources, "differing_params": settings})
    curves = {label: sorted(run["dev_loss"].items()) for label, run in result["runs"].items()}
    figure = dev_loss_figure(curves, "Dev loss by training step")
    figure.savefig(paths[2], dpi=120, metadata={"Software": None})
    return paths


@entry_point("dev_loss")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench.dev_loss",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs="+", action="append", required=True,
                        metavar="LABEL DIR [STORE]",
                        help="a label, a train-stage output folder and its MLflow store "
                             "(default: this repository's); the first run is the reference")
    parser.add_argument("--out", type=Path, default=Path("reports/dev_loss"),
                        help="path without suffix of the .md, .json and .png written")
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args(argv)
    if len(args.run) < 2 or any(len(run) not in (2, 3) for run in args.run):
        parser.error("give --run LABEL DIR [STORE] at least twice")
    runs = {label: read_run(Path(folder), store[0] if store else None)
            for label, folder, *store in args.run}
    sources = {label: f"`{folder}`, MLflow run `{runs[label].run_id}`"
               for label, folder, *_ in args.run}
    result = compare({label: run.dev_loss for label, run in runs.items()}, args.tolerance)
    settings = differing_params(runs)
    for path in write(result, sources, settings, args.out):
        print(path)
    print(markdown(result, sources, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
