"""A preset's overrides (``presets/<name>.yaml``, ``extends`` followed) merged over params.yaml
and validated, its ``dvc exp run --temp -S ...`` command, and a user's file adopted (``--from``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rnnsearch.config.base import read_params
from rnnsearch.errors import ConfigError
from rnnsearch.config.repository import check_name, load_preset, preset_path, repo_root
from rnnsearch.config.sections import grid_cells, validate_params
from rnnsearch.config.trees import merge
from rnnsearch.runs.branches import section
from rnnsearch.runs.overrides import override_argument



EXTENDS = "extends"                       # a preset's key naming the preset it starts from



def preset_overrides(name: str, seen: tuple[str, ...] = (),
                     own: dict[str, Any] | None = None) -> dict[str, Any]:
    """Preset ``name``'s file (or ``own``, its overrides to be) merged over its ``extends``
    (recursively); an unknown name or a cycle is a :class:`ConfigError` naming the file."""
    own = dict(load_preset(name) if own is None else own)
    base = own.pop(EXTENDS, None)
    if base is None:
        return own
    if not isinstance(base, str) or base in seen + (name,):
        raise ConfigError(f"{preset_path(name)}: {EXTENDS}: must name another preset, not one "
                          f"that leads back to it, got {base!r}")
    return merge(preset_overrides(base, seen + (name,)), own)


def override_arguments(base: dict[str, Any], preset: dict[str, Any],
                       prefix: str = "") -> list[str]:
    """The ``-S`` overrides setting ``preset`` over ``base``: mappings both have are entered key
    by key, anything else set whole (Hydra cannot enter a null); keys ``base`` lacks get ``+``."""
    out = []
    for key, value in preset.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out += override_arguments(base[key], value, f"{dotted}.")
        else:
            out.append(("" if key in base else "+") + override_argument(dotted, value))
    return out


def resolve(name: str, params_path: str | Path = "params.yaml", runtime: bool = False,
            source: str | Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """Preset ``name``'s merged, validated params (overrides from ``source`` if given) and grid
    cells; ``runtime``: also check that this machine can run it (packages, accelerator)."""
    own = None if source is None else read_params(source)
    merged = merge(read_params(params_path), preset_overrides(name, own=own))
    configs = validate_params(merged, f"{params_path} + {source or f'presets/{name}.yaml'}",
                              runtime)
    return merged, grid_cells(configs["train"])


def command(name: str) -> list[str]:
    """The ``dvc exp run --temp`` command of preset ``name``."""
    args = ["dvc", "exp", "run", "--temp", "-n", name]
    for override in override_arguments(read_params(repo_root() / "params.yaml"),
                                       preset_overrides(name)):
        args += ["-S", override]
    return args


def run_environment(params: dict[str, Any]) -> dict[str, str]:
    """This environment plus a relative ``prepare.mirror``, resolved against the repository
    root, in ``RNNSEARCH_CORPORA`` (unless set): the temporary copy would resolve it wrongly."""
    from rnnsearch.data.corpora import MIRROR_ENV

    env = dict(os.environ)
    from rnnsearch.config.prepare import PrepareConfig

    mirror = section(params, PrepareConfig, "prepare").mirror
    if mirror and not env.get(MIRROR_ENV) and not Path(mirror).expanduser().is_absolute():
        env[MIRROR_ENV] = str((repo_root() / mirror).resolve())
    return env


def check_adoptable(name: str, source: str | Path) -> None:
    """Refuse ``source`` if missing, not a YAML mapping, or unlike an existing preset ``name``."""
    source, target = Path(source), preset_path(check_name(name))
    if not source.is_file():
        raise ConfigError(f"{source}: file not found (the params overrides of experiment "
                          f"'{name}')")
    read_params(source)                                  # a YAML mapping, or an error naming it
    if target.is_file() and target.read_bytes() != source.read_bytes():
        raise ConfigError(f"{target}: a different preset '{name}' exists; choose another NAME, "
                          f"or edit {target} itself")


def adopt(name: str, source: str | Path) -> Path:
    """Copy the overrides file ``source`` to ``presets/<name>.yaml``, once the params are valid."""
    check_adoptable(name, source)
    source, target = Path(source), preset_path(name)
    text = source.read_bytes()
    if not target.is_file():
        target.write_bytes(text)
        print(f"experiment '{name}': {source} copied to {target.relative_to(repo_root())} "
              f"(commit it to keep the experiment's definition)")
    return target
