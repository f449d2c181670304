"""The layout the design promises: stage code in stages/, imports that run one way only."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src" / "rnnsearch"
BOTTOM = ("config", "data")                       # import nothing of the project above them
BELOW_ALL = ("errors",)                           # the exception classes: import nothing of it
LIBRARY = ("config", "data", "models", "training", "lm", "decoding", "evaluation",
           "reporting", "embeddings")             # never import a stage
STAGES = ("prepare", "tokenize", "embed", "senses", "pretrain_lm", "train", "translate",
          "evaluate", "report")


def project_imports(path: Path) -> set[str]:
    """The ``rnnsearch.*`` modules a source file imports (at any depth of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rnnsearch"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rnnsearch"))
    return found


def package_files(package: str) -> list[Path]:
    return sorted((SRC / package).glob("*.py"))


@pytest.mark.parametrize("package", BOTTOM)
def test_config_and_data_import_nothing_above_them(package):
    for path in package_files(package):
        upward = {m for m in project_imports(path)
                  if m.split(".")[1] not in BOTTOM + BELOW_ALL}
        assert not upward, f"{path.relative_to(REPO)} imports {sorted(upward)}"


def test_the_error_classes_import_nothing_of_the_project():
    assert not project_imports(SRC / "errors.py")


def test_data_does_not_import_config():
    """data/ is the lowest layer: config may use its registries, not the other way round."""
    for path in package_files("data"):
        assert not any(m.startswith("rnnsearch.config") for m in project_imports(path)), path


@pytest.mark.parametrize("package", LIBRARY)
def test_library_packages_hold_no_stage_code(package):
    for path in package_files(package):
        assert not any(m.startswith("rnnsearch.stages") for m in project_imports(path)), path


def test_every_dvc_stage_has_its_module_and_a_one_call_script():
    for stage in STAGES:
        module = SRC / "stages" / f"{stage}.py"
        assert "STAGE = Stage(" in module.read_text(encoding="utf-8"), module
        script = REPO / "pipeline" / ("tokenize_text.py" if stage == "tokenize" else f"{stage}.py")
        code = [line for line in script.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith(('"""', "Named"))]
        assert code == ["from _entry import run_stage", f'run_stage("{stage}")'], script


def make(*args: str) -> subprocess.CompletedProcess:
    """``make ARGS`` in the repository, without running anything (``.venv`` may be missing: the
    targets below fail or print before they would need it)."""
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *args],
                          capture_output=True, text=True, timeout=60)


def test_make_help_lists_every_target_with_its_description():
    phony = re.search(r"^\.PHONY:(.*?)\n(?!\t)", (REPO / "Makefile").read_text(),
                      re.M | re.S).group(1).replace("\\", " ").split()
    listed = make("help")
    assert listed.returncode == 0, listed.stderr
    described = re.findall(r"^make (\S+)\n    \S", listed.stdout, re.M)
    assert sorted(described) == sorted(phony) and "repro" in phony and "test" in phony
    users = ["setup", "repro", "test", "ui", "bench", "preset", "experiment", "gpu-check",
             "paper-curve"]
    assert described[:len(users)] == users        # a user's targets first, a contributor's after
    assert listed.stdout.index("A user's targets") < listed.stdout.index("make setup")
    assert listed.stdout.index("make paper-curve\n") < listed.stdout.index(
        "A contributor's targets") < listed.stdout.index("make test-fast")


@pytest.mark.parametrize("target, variable", [("preset", "NAME"),
                                              ("paper-curve-report", "RESULTS")])
def test_make_targets_that_need_a_variable_say_so(target, variable):
    done = make("-o", ".venv/.installed", target)     # -o: do not install the stack for this
    assert done.returncode != 0 and f"needs {variable}=" in done.stderr
