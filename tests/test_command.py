"""How every command ends: one line for an expected failure, a message for Ctrl-C, a traceback
for a bug."""
from __future__ import annotations

import errno

import pytest

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
