"""``export NAME``: a preset's report, metrics and params copied from its branch into
``reports/presets/<name>/`` under a provenance heading, and its comparisons made again."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Sequence

import yaml

from rnnsearch.config.base import parse_params
from rnnsearch.config.repository import check_name, repo_root
from rnnsearch.config.trees import flatten
from rnnsearch.runs.branches import branch, branch_cells, export_folder, git, require_branch
from rnnsearch.runs.comparison import tested_comparison
from rnnsearch.runs.overrides import override_argument

if TYPE_CHECKING:
    from rnnsearch.reporting.beside import Outcome



def exported(name: str) -> None:
    """:func:`export` preset ``name`` and say where its report is."""
    folder = export(name).relative_to(repo_root())
    print(f"preset '{name}': its report (from the branch {branch(name)}) is in {folder}/"
          f"README.md; 'dvc exp show' lists it; its test translations: dvc get . "
          f"data/translations --rev {branch(name)}")


# What export copies from a preset's branch: its report, and the metrics and params it came from.
REPORT_PATHS = ("reports/README.md", "reports/results", "metrics", "params.yaml")


CELL_FILE = re.compile(r".+-\d+")     # a file named after a grid cell: <model>-<max length>


def changed_params(root: Path, ref: str) -> list[str]:
    """``key=value`` for every params leaf the commit ``ref`` changed against its parent."""
    def params_at(rev: str) -> dict[str, Any]:
        where = f"{rev}:params.yaml"
        return flatten(parse_params(git(root, "show", where), where))

    before, after = params_at(f"{ref}^"), params_at(ref)
    return [override_argument(key, value) for key, value in after.items()
            if before.get(key, object()) != value]


GIVEN_SPLIT_SIZE = re.compile(r"prepare\.sizes\.(\w+)=")


def unused_overrides(overrides: list[str], prepared: dict[str, Any]) -> list[str]:
    """The ``prepare.sizes.<split>=...`` of ``overrides`` that did nothing: the run's
    ``metrics/prepare.json`` says no pair of that split was left unsampled (its files given and
    used whole, or the test split held out of train by ``prepare.custom.test_size``)."""
    return [o for o in overrides if (m := GIVEN_SPLIT_SIZE.match(o))
            and isinstance(prepared.get(m.group(1)), dict)
            and not prepared[m.group(1)].get("not_sampled")]


def provenance(name: str, root: Path, ref: str, beside: bool = False) -> str:
    """The paragraph heading an exported report: which run made it, how to rerun it."""
    commit, baseline = (git(root, "rev-parse", "--short", rev) for rev in (ref, f"{ref}^"))
    changed = changed_params(root, ref)
    try:
        prepared = json.loads(git(root, "show", f"{ref}:metrics/prepare.json"))
    except (subprocess.CalledProcessError, ValueError):
        prepared = {}
    unused = unused_overrides(changed, prepared)
    overrides = ", ".join(f"`{o}`" for o in changed if o not in unused) or "none"
    if unused:
        overrides += (" (set but without effect, no pair of that split left unsampled: "
                      + ", ".join(f"`{o}`" for o in unused) + ")")
    compared = (" Beside the default run: [beside_default.md]"
                "(beside_default.md)." if beside else "")
    return (f"> Preset `{name}`: the report of the git branch `{branch(name)}` (experiment "
            f"commit `{commit}`, run on `{baseline}`), copied here by `python -m rnnsearch.presets "
            f"export {name}`. Params changed against the default run: {overrides}. Run it again "
            f"with `make preset NAME={name}`. Its `metrics/` and `params.yaml` are beside this "
            f"file.{compared}\n\n")


def export(name: str) -> Path:
    """Replace :func:`export_folder` atomically with preset ``name``'s report from its branch,
    headed by :func:`provenance`, and redo its comparisons (default run, earlier presets)."""
    from rnnsearch.data.textio import atomic_dir
    from rnnsearch.reporting.write import REGENERATE, regenerate_line

    root, ref = repo_root(), branch(check_name(name))
    require_branch(root, ref, f"run the preset first (make preset NAME={name})")
    others = compared_presets(export_folder(name))
    files = git(root, "ls-tree", "-r", "--name-only", ref, "--", *REPORT_PATHS).splitlines()
    if git(root, "ls-tree", "--name-only", ref, "--", "dvc.lock"):
        files = own_files(files, yaml.safe_load(git(root, "show", f"{ref}:dvc.lock")),
                          branch_cells(root, ref))
    with atomic_dir(export_folder(name)) as folder:
        for path in files:
            content = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=root,
                                     capture_output=True, check=True).stdout
            inside = PurePosixPath(path)
            target = folder / (inside.relative_to("reports") if inside.parts[0] == "reports"
                               else inside)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        beside, *_ = (exported_comparison(name, folder, against) for against in (None, *others))
        index = folder / PurePosixPath(REPORT_PATHS[0]).name
        if index.is_file():
            shown = export_folder(name).relative_to(root)
            page = index.read_text(encoding="utf-8").replace(
                REGENERATE, regenerate_line(shown / "params.yaml", shown / "metrics", shown), 1)
            index.write_text(provenance(name, root, ref, bool(beside.written)) + page,
                             encoding="utf-8")
    return export_folder(name)


def exported_comparison(name: str, folder: Path, against: str | None) -> Outcome:
    """:func:`tested_comparison`, an expected failure turned into an outcome saying why."""
    from rnnsearch.errors import ExpectedError
    from rnnsearch.reporting.beside import Outcome

    try:
        return tested_comparison(name, folder, against)
    except ExpectedError as err:
        outcome = Outcome([], f"no comparison with {against or 'the default run'}: {err}")
        print(f"preset '{name}': {outcome.message}")
        return outcome


def compared_presets(folder: Path) -> list[str]:
    """The presets named by ``beside_<other>.md`` in an exported folder (not the default)."""
    return sorted(path.stem.removeprefix("beside_") for path in folder.glob("beside_*.md")
                  if path.stem != "beside_default")


def own_files(files: list[str], lock: dict[str, Any], cells: Sequence[str]) -> list[str]:
    """The branch's ``files`` its own run wrote: all outside ``metrics/``; inside, the outputs
    in ``lock`` (files named after a cell only for ``cells``). The rest came with the copied
    workspace (DVC keeps lock entries of cells the experiment never ran)."""
    outs = {out["path"] for stage in lock.get("stages", {}).values()
            for out in stage.get("outs", [])}

    def own(path: str) -> bool:
        if not path.startswith("metrics/"):
            return True
        stem = PurePosixPath(path).stem
        written = path in outs or any(path.startswith(f"{out}/") for out in outs)
        return written and (not CELL_FILE.fullmatch(stem) or stem in cells)
    return [path for path in files if own(path)]
