"""``make exps`` (``python -m rnnsearch.runs.exps``): the experiments and presets' branches in
two narrow tables that fit any terminal: the params each changed against the workspace, then a
row per experiment and grid cell with its headline numbers (``metrics/summary/<cell>.json``).
``dvc exp show`` has a column per param and metric (some 300): most numbers are cut off."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import PurePosixPath
from typing import Any, Iterator

from rnnsearch.command import entry_point
from rnnsearch.config.repository import repo_root
from rnnsearch.config.trees import flatten
from rnnsearch.runs.overrides import override_argument

SUMMARY = "metrics/summary/"
NUMBERS = (("bleu", "BLEU", 2), ("bleu_no_unk", "No UNK", 2), ("dev_ppl", "Dev ppl", 2))


def experiment_rows(shown: list[dict[str, Any]], seen: set[str] | None = None
                    ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, data) per row of ``dvc exp show --all-branches --json`` in DVC's order: workspace,
    baseline commit and its experiments, other branches (``preset/<name>``, also of earlier
    commits); a commit shown already (a branch made from an experiment) once, by its first name."""
    seen = set() if seen is None else seen
    for entry in shown:
        rev = entry["rev"]
        if entry.get("data") and rev not in seen:
            seen.add(rev)
            yield entry.get("name") or (rev if rev == "workspace" else rev[:7]), entry["data"]
        for experiment in entry.get("experiments") or []:
            yield from experiment_rows(experiment.get("revs", [])[:1], seen)


def params_of(data: dict[str, Any]) -> dict[str, Any]:
    """A row's params.yaml as flat ``key: value``."""
    return flatten(((data.get("params") or {}).get("params.yaml") or {}).get("data") or {})


def cell_numbers(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A row's headline numbers per grid cell (``metrics/summary/<cell>.json``)."""
    return {PurePosixPath(path).stem: (found.get("data") or {})
            for path, found in (data.get("metrics") or {}).items()
            if path.startswith(SUMMARY) and PurePosixPath(path).stem != "lm"}


def changed(params: dict[str, Any], workspace: dict[str, Any]) -> list[str]:
    """``key=value`` for each param that differs from the workspace's."""
    return [override_argument(key, value) for key, value in params.items()
            if workspace.get(key, object()) != value]


def number(value: Any, digits: int) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "–"


def tables(shown: list[dict[str, Any]]) -> str:
    """The two tables of :data:`__doc__` as text."""
    rows = list(experiment_rows(shown))
    workspace = params_of(rows[0][1]) if rows else {}
    width = max([len(name) for name, _ in rows] + [len("Experiment")])
    lines = [f"{'Experiment':<{width}}  Params that differ from the workspace's"]
    lines += [f"{name:<{width}}  {', '.join(changed(params_of(data), workspace)) or '–'}"
              for name, data in rows]
    cells = [(name, cell, values) for name, data in rows
             for cell, values in sorted(cell_numbers(data).items())]
    cell_width = max([len(cell) for _, cell, _ in cells] + [len("Cell")])
    lines += ["", f"{'Experiment':<{width}}  {'Cell':<{cell_width}}"
              + "".join(f"  {title:>8}" for _, title, _ in NUMBERS)]
    lines += [f"{name:<{width}}  {cell:<{cell_width}}"
              + "".join(f"  {number(values.get(key), digits):>8}" for key, _, digits in NUMBERS)
              for name, cell, values in cells]
    return "\n".join(lines) + "\n"


@entry_point("exps")
def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m rnnsearch.runs.exps", description=__doc__
                            ).parse_args(argv)
    shown = subprocess.run(["dvc", "exp", "show", "--all-branches", "--json"], cwd=repo_root(),
                           check=True, capture_output=True, text=True).stdout
    sys.stdout.write(tables(json.loads(shown)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
