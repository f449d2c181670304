"""Presets: named sets of params overrides (``presets/<name>.yaml``) run as a DVC experiment.

A preset file holds only the keys it changes, in params.yaml's layout. Running it

    python -m rnnsearch.presets run paper      # = make preset NAME=paper

merges it over params.yaml, validates the result (every section, the grid), and starts
``dvc exp run -n <name> -S key=value ...`` with one ``-S`` per changed leaf, so the run is an
ordinary DVC experiment (``dvc exp show`` lists it; ``dvc exp apply`` keeps it).
``show`` prints that command instead of running it; ``check`` only validates.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from rnnsearch.config.base import ConfigError, read_params
from rnnsearch.config.sections import grid_cells, validate_params
from rnnsearch.tracking import repo_root

_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")  # strings that need no quoting in an override


def preset_path(name: str) -> Path:
    """``presets/<name>.yaml`` at the repository root."""
    return repo_root() / "presets" / f"{name}.yaml"


def load_preset(name: str) -> dict[str, Any]:
    """The overrides of preset ``name``; a missing preset lists the ones there are."""
    path = preset_path(name)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"{path}: no preset '{name}' (known: {', '.join(known)})")
    return read_params(path)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in recursively (lists and scalars replace)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``[("a.b", value), ...]`` for every non-mapping value of ``tree``."""
    out = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.extend(leaves(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def override_argument(key: str, value: Any) -> str:
    """One ``dvc exp run -S`` override in DVC's (Hydra's) syntax."""
    if value is None:
        return f"{key}=null"
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    if isinstance(value, str):
        return f"{key}={value if _PLAIN.fullmatch(value) else json.dumps(value)}"
    if isinstance(value, list):
        return f"{key}=[{','.join(json.dumps(v) if isinstance(v, str) else str(v) for v in value)}]"
    return f"{key}={value}"


def resolve(name: str, params_path: str | Path = "params.yaml", runtime: bool = False
            ) -> tuple[dict[str, Any], list[str]]:
    """Validate preset ``name`` over ``params_path``; returns the merged params and grid cells.

    ``runtime``: also check that this machine can run it (packages, accelerator)."""
    merged = merge(read_params(params_path), load_preset(name))
    configs = validate_params(merged, f"{params_path} + presets/{name}.yaml", runtime)
    return merged, grid_cells(configs["train"])


def command(name: str) -> list[str]:
    """The ``dvc exp run`` command line that runs preset ``name``."""
    args = ["dvc", "exp", "run", "-n", name]
    for key, value in leaves(load_preset(name)):
        args += ["-S", override_argument(key, value)]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.presets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["check", "show", "run"])
    parser.add_argument("name", help="preset name: a file presets/<name>.yaml")
    args = parser.parse_args(argv)
    try:
        _, cells = resolve(args.name, repo_root() / "params.yaml", runtime=args.action == "run")
    except ConfigError as err:
        print(f"presets: error: {err}", file=sys.stderr)
        return 2
    cmd = command(args.name)
    if args.action == "check":
        print(f"preset '{args.name}' is valid; grid cells: {', '.join(cells)}")
        return 0
    print(" ".join(f"'{a}'" if any(c in a for c in " []{}\"") else a for a in cmd))
    return subprocess.call(cmd, cwd=repo_root()) if args.action == "run" else 0


if __name__ == "__main__":
    sys.exit(main())
