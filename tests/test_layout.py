"""The layout the design promises: stage code in stages/, imports that run one way only.

Every module of ``src/rnnsearch`` is checked (``import_graph.py`` reads imports at any depth,
those inside functions included):

* no import cycle, of any length, between two modules;
* no module imports a unit (a top-level package or module of rnnsearch) of its own layer or of a
  layer above it, in the order :data:`LAYERS`, lowest first. Why each unit sits where it does:

  - ``errors``, ``code_graph``: the project's exception classes, and the reader of its own
    import graph (what each DVC stage runs); they import nothing, so every layer can use them.
  - ``data``: file formats, text I/O, vocabularies, corpora; the lowest layer of the design.
  - ``config``: the typed params of every section (using data's registries of corpora and
    vocabularies), with the repository's params files (``repo_root``, presets, merging).
  - ``environment``, ``procgroup``, ``ui_app``, ``command``, ``allocator``, ``dvc_outputs``:
    independent helpers (the machine's description, process groups, the MLflow UI's app, how
    a command ends, the C library's allocator settings, DVC's outputs), used by tracking, the
    stages and the tools alike.
  - ``tracking``: the MLflow store, runs and tags (uses the helpers above).
  - ``models``, ``alignment``, ``embeddings``, ``evaluation``, ``reporting``: independent
    library packages above data and config.
  - ``decoding``: searches a trained model (``models``).
  - ``training``: trains a model, its dev BLEU by greedy decoding (``decoding``), its init from
    word vectors (``embeddings``) and a language model (``models.lm_transfer``).
  - ``lm``: the language model, trained with training's checkpoint and resume machinery.
  - ``runs``: finished runs kept apart from the workspace (an experiment's git branch and DVC
    cache) and the comparison of two runs, shared by the ``compare`` stage and the presets tool.
  - ``stages``, ``bench``, ``experiments``, ``presets``: the commands, each on the library,
    none on another: a stage runs only its own stage, and a tool runs the library, not a stage
    module.

``pipeline/`` sits above all of them and is one call per stage (checked below).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from import_graph import cycles, layer_problems, read_graph

SRC = REPO / "src"
LAYERS = (
    ("errors", "code_graph"),
    ("data",),
    ("config",),
    ("environment", "procgroup", "ui_app", "command", "allocator", "dvc_outputs"),
    ("tracking",),
    ("models", "alignment", "embeddings", "evaluation", "reporting"),
    ("decoding",),
    ("training",),
    ("lm",),
    ("runs",),
    ("stages", "bench", "experiments", "presets"),
)
STAGES = ("prepare", "tokenize", "embed", "senses", "pretrain_lm", "code", "train",
          "translate", "search_error", "evaluate", "align", "align_attention", "report")


def test_no_module_imports_itself_through_others():
    assert cycles(read_graph(SRC, "rnnsearch")) == []


def test_every_import_runs_down_the_layers():
    assert layer_problems(read_graph(SRC, "rnnsearch"), LAYERS) == []


def write_package(root: Path, files: dict[str, str]) -> Path:
    """A package ``toy`` of ``files`` (path inside it -> source) under ``root``."""
    for name, source in {"__init__.py": "", **files}.items():
        path = root / "toy" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


TOY_LAYERS = (("low",), ("mid", "side"), ("high",))


def test_the_checker_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    src = write_package(tmp_path, {
        "low.py": "",
        "high/__init__.py": "",
        "high/a.py": "def f():\n    from toy.high import b\n    return b\n",
        "high/b.py": "from toy.high.c import g\n",
        "high/c.py": "import toy.high.a as a\nimport toy.low\n",
    })
    graph = read_graph(src, "toy")
    assert cycles(graph) == [["toy.high.a", "toy.high.b", "toy.high.c"]]
    assert layer_problems(graph, TOY_LAYERS) == []       # a cycle inside one unit: only cycles()


def test_the_checker_finds_an_upward_import_and_one_between_siblings(tmp_path):
    src = write_package(tmp_path, {
        "low.py": "def f():\n    from toy.mid.x import y\n    return y\n",
        "mid/__init__.py": "",
        "mid/x.py": "y = 1\n",
        "side.py": "from .mid import x\n",                  # relative: toy.mid.x
        "high.py": "from toy import low, side\n",
        "stray.py": "from toy import low\n",
    })
    graph = read_graph(src, "toy")
    assert cycles(graph) == []
    assert layer_problems(graph, TOY_LAYERS) == [
        "toy.low imports toy.mid.x: mid is in a layer above low",
        "toy.side imports toy.mid.x: mid is in the same layer as side",
        "toy.stray is in no layer of the layer order",
    ]


def test_a_registry_entry_is_an_import_of_each_module_that_loads_the_registry(tmp_path):
    """An entry names its code as ``"module:attribute"``; a module that imports the registry and
    the loader (``config.registry``) runs that code, one that imports the registry only does
    not."""
    src = write_package(tmp_path, {
        "config/__init__.py": "",
        "config/registry.py": "def load(reference):\n    return reference\n",
        "config/names.py": 'NAMES = {"a": "toy.impl:f", "b": "toy.missing:g", "c": "not one"}\n',
        "impl.py": "def f():\n    return 1\n",
        "user.py": "from toy.config.names import NAMES\nfrom toy.config.registry import load\n",
        "reader.py": "from toy.config.names import NAMES\n",
    })
    graph = read_graph(src, "toy")
    assert graph.imports["toy.user"] == {"toy.config.names", "toy.config.registry", "toy.impl"}
    assert graph.imports["toy.reader"] == {"toy.config.names"}
    assert graph.imports["toy.config.names"] == frozenset()


def test_every_dvc_stage_has_its_module_and_a_one_call_script():
    for stage in STAGES:
        module = SRC / "rnnsearch" / "stages" / f"{stage}.py"
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
    users = ["setup", "repro", "test", "ui", "bench", "bench-full", "preset", "experiment", "exps",
             "translate", "default", "gpu-check"]
    assert described[:len(users)] == users        # a user's targets first, a contributor's after
    assert listed.stdout.index("A user's targets") < listed.stdout.index("make setup")
    assert listed.stdout.index("make gpu-check\n") < listed.stdout.index(
        "A contributor's targets") < listed.stdout.index("make test-fast")


@pytest.mark.parametrize("target, variable", [("preset", "NAME"), ("experiment", "NAME"),
                                              ("translate", "NAME")])
def test_make_targets_that_need_a_variable_say_so(target, variable):
    done = make("-o", ".venv/.installed", target)     # -o: do not install the stack for this
    assert done.returncode != 0 and f"needs {variable}=" in done.stderr


@pytest.mark.parametrize("target, variables", [("preset", ["NAME"]),
                                               ("experiment", ["NAME", "PARAMS"]),
                                               ("translate", ["NAME", "CELL", "INPUT"])])
def test_make_targets_hand_their_variables_to_the_command_unexpanded(tmp_path, target,
                                                                     variables):
    """Was: NAME, PARAMS, CELL and INPUT reached the shell unquoted, so a value such as
    ``a;touch x;echo`` ran ``touch``. Each now reaches the presets command as typed (make
    preset's NAME word by word, a chain), and the preset name rule refuses it."""
    touched = {variable: tmp_path / variable for variable in variables}
    done = make("-o", ".venv/.installed", f"PY={sys.executable}", target,
                *(f"{variable}=a;touch {path};echo" for variable, path in touched.items()))
    assert [variable for variable, path in touched.items() if path.exists()] == []
    assert done.returncode != 0 and "preset name 'a;touch" in done.stderr, done.stderr
    assert "letters, digits, _ and -" in done.stderr and "Traceback" not in done.stderr


def test_every_make_target_runs_word2vec_on_the_committed_runs_blas_kernels(monkeypatch):
    """Was: docs/reproducibility.md's byte-for-byte promise needed OPENBLAS_CORETYPE=Haswell,
    which nothing set. The Makefile exports it to every recipe; a user's own value wins."""
    shown = ["--eval", "shown: ; @echo $$OPENBLAS_CORETYPE", "shown"]
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    assert make(*shown).stdout.strip() == "Haswell"
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")
    assert make(*shown).stdout.strip() == "SkylakeX"


ERROR_NAMES = {"ExpectedError", "ConfigError", "DataError", "StageError", "TrainingDiverged",
               "NotSplit", "EXPECTED"}


def test_the_error_classes_are_imported_from_rnnsearch_errors_only():
    """Was: from four modules (errors, data.textio, config.base, stages.runner re-exported them)."""
    elsewhere = []
    for path in [*(REPO / "src").rglob("*.py"), *(REPO / "tests").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rnnsearch")
                    and node.module != "rnnsearch.errors"
                    and ERROR_NAMES & {alias.name for alias in node.names}):
                elsewhere.append(f"{path.relative_to(REPO)}:{node.lineno} {node.module}")
    assert elsewhere == []
