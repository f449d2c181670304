"""dvc.yaml's ``deps`` follow the code: ``dvc repro`` reruns every stage a code change can touch.

For each stage, the files it runs are its ``pipeline/<script>.py``, ``pipeline/_entry.py`` and the
static import closure of ``rnnsearch.stages.<stage>`` within the package (imports at any depth,
and the ``__init__.py`` of every package on the way: :func:`import_graph.closure`). Each must be
covered by the stage's deps (the file, or a folder above it), except the modules of
:data:`CANNOT_CHANGE_A_RESULT`.
"""
from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import REPO, make_project, run_in
from import_graph import closure, read_graph

SRC = REPO / "src"

# Modules a stage imports that cannot change what it writes, so that a change to them need not
# rerun it (each says why). Anything else a stage imports belongs in its deps.
CANNOT_CHANGE_A_RESULT = {
    "rnnsearch": "the package's docstring and version string only",
    "rnnsearch.tracking": "MLflow: where runs are logged and how they are tagged",
    "rnnsearch.ui_app": "the MLflow UI's web app (tracking imports it for `make ui`)",
    "rnnsearch.environment": "describes the machine a run used; a change alters that "
                             "description in a metrics file, never a number",
    "rnnsearch.procgroup": "process groups: stops a stage's children with it",
    "rnnsearch.command": "how a command ends: the one-line error and its exit status",
    "rnnsearch.allocator": "when the C library hands freed memory back to the operating "
                           "system; every number computed stays the same, bit for bit",
}


def stages() -> dict[str, dict]:
    """dvc.yaml's stages by name (a matrix stage once)."""
    return yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def script_of(stage: dict) -> str:
    """The ``pipeline/<script>.py`` a stage's command runs."""
    return re.search(r"python (pipeline/\S+\.py)", stage["cmd"]).group(1)


def files_run(name: str, stage: dict) -> set[str]:
    """Every file (relative to the repository) the stage's command runs, less the modules of
    :data:`CANNOT_CHANGE_A_RESULT`."""
    graph = read_graph(SRC, "rnnsearch")
    modules = closure(graph, [f"rnnsearch.stages.{name}"]) - set(CANNOT_CHANGE_A_RESULT)
    return ({graph.files[m].relative_to(REPO).as_posix() for m in modules}
            | {script_of(stage), "pipeline/_entry.py"})


def uncovered(files: set[str], deps: list[str]) -> list[str]:
    """The files no dep covers (a dep covers itself and, as a folder, everything below it)."""
    return sorted(f for f in files if not any(f == d or f.startswith(f"{d}/") for d in deps))


@pytest.mark.parametrize("name", list(stages()))
def test_deps_cover_every_module_the_stage_runs(name):
    stage = stages()[name]
    missing = uncovered(files_run(name, stage), [str(dep) for dep in stage["deps"]])
    assert not missing, f"dvc.yaml: stage {name}'s deps lack {missing}"


@pytest.mark.parametrize("name", list(stages()))
def test_code_deps_are_exactly_the_modules_the_stage_runs(name):
    """No folder dep and no module the stage never imports: an edit reruns only the stages that
    run the edited file (was: train and pretrain_lm depended on all of decoding/ and models/)."""
    stage = stages()[name]
    listed = {dep for dep in stage["deps"] if dep.startswith(("src/", "pipeline/"))}
    wanted = files_run(name, stage)
    script = script_of(stage)
    lines = "\n".join(f"      - {f}" for f in [script, "pipeline/_entry.py",
                                                *sorted(f for f in wanted if f.startswith("src/"))])
    assert listed == wanted, f"dvc.yaml: stage {name}'s code deps should be exactly:\n{lines}"


def test_an_edit_to_beam_search_reruns_translate_and_what_follows_it_only(tmp_path):
    """DVC itself, in a copy of the project: after an edit to decoding/beam.py, the stages whose
    changed deps name it are the translate cells; prepare .. train and pretrain_lm are not
    touched (evaluate and report follow from translate's new outputs)."""
    project = make_project(tmp_path / "project", {})
    beam = project / "src/rnnsearch/decoding/beam.py"
    beam.write_text(beam.read_text() + "# an edit\n")
    status = json.loads(run_in(["dvc", "status", "--json"], project).stdout)
    touched = {stage for stage, entries in status.items() for entry in entries
               if isinstance(entry, dict)
               and "src/rnnsearch/decoding/beam.py" in entry.get("changed deps", {})}
    assert touched and all(stage.startswith("translate@") for stage in touched), touched


def test_no_package_init_imports_its_siblings():
    """A package's ``__init__`` holds its docstring only, so that importing one module of it
    does not import (and make a stage depend on) all the others."""
    graph = read_graph(SRC, "rnnsearch")
    inits = {m: deps for m, deps in graph.imports.items()
             if graph.files[m].name == "__init__.py" and deps}
    assert inits == {}


def test_every_module_let_off_exists_and_the_package_holds_no_code():
    graph = read_graph(SRC, "rnnsearch")
    assert set(CANNOT_CHANGE_A_RESULT) <= set(graph.files)
    assert graph.imports["rnnsearch"] == frozenset()


def test_a_missing_dep_is_found():
    files = {"pipeline/x.py", "src/rnnsearch/models/a.py", "src/rnnsearch/data/b.py"}
    assert uncovered(files, ["pipeline/x.py", "src/rnnsearch/models"]) == [
        "src/rnnsearch/data/b.py"]


def test_bytecode_caches_beside_the_sources_change_no_stage(tmp_path):
    """Python writes ``__pycache__/*.pyc`` beside every module it imports (the tests, a stage,
    ``make ui``), inside the code folders that are the stages' deps: ``.dvcignore`` leaves
    them out, so that the committed dvc.lock still matches and ``dvc repro`` retrains nothing
    because a module was imported."""
    project = make_project(tmp_path / "project", {})
    before = run_in(["dvc", "status", "--json"], project).stdout
    for folder in sorted({p.parent for p in (project / "src").rglob("*.py")}):
        cache = folder / "__pycache__"
        cache.mkdir(exist_ok=True)
        (cache / "module.cpython-311.pyc").write_bytes(b"\xa7\r\r\n" + bytes(range(64)))
    assert run_in(["dvc", "status", "--json"], project).stdout == before
    changed = {path for stage in json.loads(before).values() for entry in stage
               if isinstance(entry, dict) for path in entry.get("changed deps", {})}
    assert not any(path.startswith("src/") for path in changed), changed
