"""Where a preset's results live: its git branch ``preset/<name>`` (files, grid cells), a cell
fetched from the DVC cache, and its exported folder ``reports/presets/<name>/``."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from rnnsearch.config.base import parse_params
from rnnsearch.errors import ConfigError
from rnnsearch.config.repository import check_name, repo_root
from rnnsearch.config.sections import grid_cells

if TYPE_CHECKING:
    from rnnsearch.reporting.beside import Run



def git(root: Path, *args: str) -> str:
    """The stripped output of ``git <args>`` in ``root`` (fails on a non-zero exit)."""
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def file_at(root: Path, rev: str, path: str) -> str:
    """The text of ``path`` at git revision ``rev`` (missing: a ``DataError`` naming both)."""
    from rnnsearch.errors import DataError

    try:
        return git(root, "show", f"{rev}:{path}")
    except subprocess.CalledProcessError as err:
        raise DataError(f"{rev} has no {path} ({err.stderr.strip()})") from err


def branch(name: str) -> str:
    """The git branch that keeps preset ``name``'s results: ``preset/<name>``."""
    return f"preset/{name}"


def require_branch(root: Path, ref: str, advice: str) -> None:
    """Refuse, with ``advice``, a git branch ``ref`` that ``root`` does not have."""
    if not has_branch(root, ref):
        raise ConfigError(f"no git branch '{ref}': {advice}")


def has_branch(root: Path, ref: str) -> bool:
    """True when ``root`` has the git branch ``ref``."""
    return subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          cwd=root, capture_output=True).returncode == 0


def branch_cells(root: Path, ref: str) -> list[str]:
    """The grid cells of the params at git revision ``ref``."""
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    params = parse_params(git(root, "show", f"{ref}:params.yaml"), f"{ref}:params.yaml")
    return grid_cells(from_dict(TrainConfig, params.get("train", {}), "train"))


def trained_cell(name: str, cell: str) -> tuple[Path, str]:
    """The repository root and branch of preset ``name``, refused unless it trained ``cell``."""
    root, ref = repo_root(), branch(check_name(name))
    require_branch(root, ref, f"run it first (make experiment NAME={name} PARAMS=..., or make "
                              f"preset NAME={name})")
    cells = branch_cells(root, ref)
    if cell not in cells:
        raise ConfigError(f"{ref} trained no cell '{cell}' (its cells: {', '.join(cells)})")
    return root, ref


def fetch_cell(root: Path, rev: str, cell: str, label: str) -> Path:
    """Fetch ``cell``'s model, vocabularies and params of revision ``rev`` from the DVC cache
    into ``.cache/experiments/<label>/`` (:func:`rnnsearch.runs.cache.fetch`)."""
    from rnnsearch.runs.cache import fetch

    return fetch(root, yaml.safe_load(file_at(root, rev, "dvc.lock")),
                 file_at(root, rev, "params.yaml") + "\n", cell, label)


def export_folder(name: str) -> Path:
    """Where :func:`export` puts preset ``name``'s report: ``reports/presets/<name>/``."""
    return repo_root() / "reports" / "presets" / name


def exported_run(label: str, root: Path, folder: Path | None = None) -> Run:
    """The workspace's ``metrics/`` (``label`` "default") or preset ``label``'s exported ones."""
    from rnnsearch.reporting.beside import Run

    if label == "default":
        return Run.load("default", root / "metrics", "metrics/")
    folder = folder or export_folder(check_name(label))
    shown = export_folder(label).relative_to(root).as_posix()
    if not (folder / "metrics").is_dir():
        raise ConfigError(f"{shown}/metrics: not found; export the preset first "
                          f"(python -m rnnsearch.presets export {label})")
    return Run.load(label, folder / "metrics", f"{shown}/metrics/")


T = TypeVar("T")


def section(params: dict[str, Any], cls: type[T], key: str) -> T:
    """Section ``key`` of ``params`` as its validated dataclass (absent: its defaults); a bad
    value is a :class:`ConfigError` naming the key."""
    from rnnsearch.config.base import from_dict

    return from_dict(cls, params.get(key) or {}, key)


def report_method(params: dict[str, Any]) -> str:
    """The system the report's tables show (``report.method``), as params.yaml sets it."""
    from rnnsearch.config.report import ReportConfig

    return section(params, ReportConfig, "report").method
