"""``compare NAME [--against OTHER]``: list the comparison in ``reports/presets/comparisons.yaml``
and run its DVC stage; a failure leaves every file under ``reports/presets/`` as it was."""
from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from rnnsearch.config.base import read_params
from rnnsearch.errors import ConfigError
from rnnsearch.config.repository import check_name, repo_root
from rnnsearch.reporting.beside import significance_file
from rnnsearch.runs.branches import exported_run, report_method



COMPARISONS = Path("reports/presets/comparisons.yaml")   # the comparisons DVC tracks


PIPELINE = Path("reports/presets/dvc.yaml")              # their stages, compare@<key>


def comparison_entry(name: str, against: str | None) -> tuple[str, dict[str, str]]:
    """A comparison's key (``<name>-vs-<against or default>``) and :data:`COMPARISONS` entry."""
    baseline = against or "default"
    return f"{name}-vs-{baseline}", {
        "preset": name, "against": baseline,
        "baseline": "metrics" if against is None else f"reports/presets/{against}/metrics",
        "tests": significance_file(baseline)}


def track(name: str, against: str | None) -> tuple[str, str | None]:
    """Add the comparison to :data:`COMPARISONS` if missing; returns its key and the file's
    previous text (None when the entry was there)."""
    from rnnsearch.data.textio import atomic_write_text

    path = repo_root() / COMPARISONS
    key, entry = comparison_entry(name, against)
    if (read_params(path).get("comparisons") or {}).get(key) == entry:
        return key, None
    before = path.read_text(encoding="utf-8")
    line = yaml.safe_dump({key: entry}, sort_keys=False, default_flow_style=None, width=200)
    atomic_write_text(path, f"{before}  {line}")
    return key, before


def require_comparable(name: str, against: str | None) -> None:
    """Refuse a comparison with no table: no cell differs, or the test sets may differ."""
    from rnnsearch.reporting.beside import differing_cells, unshared_test_set

    root = repo_root()
    preset = exported_run(check_name(name), root)
    baseline = exported_run(check_name(against) if against else "default", root)
    method = report_method(read_params(root / "params.yaml"))
    reason = ("no cell of the two runs differs" if not differing_cells(baseline, preset, method)
              else unshared_test_set(baseline, preset))
    if reason is not None:
        raise ConfigError(f"preset '{name}' is not compared with {baseline.title}: {reason}")


def dispatch(name: str, against: str | None) -> int:
    """Track the comparison and run its DVC stage ``compare@<key>``; a failure untracks a new
    entry and raises :class:`ConfigError`."""
    from rnnsearch.data.textio import atomic_write_text

    require_comparable(name, against)
    key, before = track(name, against)
    stage = f"{PIPELINE.as_posix()}:compare@{key}"
    status = subprocess.call(["dvc", "repro", "--force", "--single-item", stage], cwd=repo_root())
    if status:              # the stage put its previous outputs back (the stage runner)
        if before is not None:
            atomic_write_text(repo_root() / COMPARISONS, before)
        raise ConfigError(f"the comparison compare@{key} was not made (DVC's output above says "
                          f"why); every file under reports/presets/ is as it was")
    return 0
