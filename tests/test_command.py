"""How every command ends: one line for an expected failure, a message for Ctrl-C, a traceback
for a bug."""
from __future__ import annotations

import ast
import errno
from pathlib import Path

import pytest

from conftest import REPO
from rnnsearch.command import EXIT_ERROR, EXIT_INTERRUPTED, entry_point, run_command
from rnnsearch.errors import ConfigError, DataError, StageError, TrainingDiverged


def fail_with(error: BaseException):
    """A command body that raises ``error``."""
    def body() -> int:
        raise error
    return body


@pytest.mark.parametrize("error, line", [
    (ConfigError("train.lr: must be > 0,\n  got -1"), "tool: error: train.lr: must be > 0, got -1"),
    (DataError("data/a.txt:3: invalid UTF-8"), "tool: error: data/a.txt:3: invalid UTF-8"),
    (StageError("out: locked by pid 7"), "tool: error: out: locked by pid 7"),
    (TrainingDiverged("m: training diverged"), "tool: error: m: training diverged"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "a.txt"),
     "tool: error: [Errno 2] No such file or directory: 'a.txt'"),
])
def test_an_expected_failure_is_one_line_and_exit_status_2(error, line, capsys):
    assert run_command("tool", fail_with(error)) == EXIT_ERROR
    assert capsys.readouterr().err == line + "\n"


def test_ctrl_c_says_so_and_exits_130(capsys):
    status = run_command("tool", fail_with(KeyboardInterrupt()), "interrupted; nothing written")
    assert status == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "tool: interrupted; nothing written\n"


@pytest.mark.parametrize("bug", [ValueError("too many values to unpack"), KeyError("x"),
                                 TypeError("unsupported operand")])
def test_a_bug_is_not_hidden(bug, capsys):
    with pytest.raises(type(bug)):
        run_command("tool", fail_with(bug))
    assert capsys.readouterr().err == ""


def test_the_decorator_passes_argv_and_the_status_through(capsys):
    @entry_point("tool")
    def main(argv: list[str] | None = None) -> int:
        if argv == ["bad"]:
            raise DataError("bad: not a file")
        return len(argv or [])

    assert main(["a", "b", "c"]) == 3 and main() == 0
    assert main(["bad"]) == EXIT_ERROR
    assert capsys.readouterr().err == "tool: error: bad: not a file\n"
    assert run_command("tool", lambda: None) == 0
    assert run_command("tool", lambda: {"report": 1}) == 0


def main_is_guarded(path: Path) -> bool:
    """Whether the module's ``__main__`` block runs its command through run_command: it calls
    run_command itself, or calls ``main``, which is decorated with ``entry_point`` or calls
    run_command in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and "__main__" in ast.unparse(node.test))
    if "run_command(" in ast.unparse(block):
        return True
    main = next((node for node in tree.body if isinstance(node, ast.FunctionDef)
                 and node.name == "main"), None)
    return main is not None and (
        any("entry_point" in ast.unparse(d) for d in main.decorator_list)
        or "run_command(" in ast.unparse(main))


def test_every_command_runs_through_run_command():
    """Was: make ui (rnnsearch.tracking) and bench/output_layer.py ran outside it, so their
    expected failures were tracebacks. Every ``python -m`` module and pipeline script is
    guarded (pipeline scripts through rnnsearch.stages.runner.run)."""
    modules = [p for p in (REPO / "src/rnnsearch").rglob("*.py")
               if "__name__ == \"__main__\"" in p.read_text(encoding="utf-8")]
    assert len(modules) >= 8
    unguarded = [str(p.relative_to(REPO)) for p in modules if not main_is_guarded(p)]
    assert unguarded == []
