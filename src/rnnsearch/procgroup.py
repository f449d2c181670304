"""Run a command as its own process group that ends when this process is stopped.

``mlflow server`` is a process tree that a SIGTERM to ``make ui`` used to leave serving.
:func:`run_group` turns SIGTERM, SIGINT and SIGHUP into SIGTERM to the group (SIGKILL after a
grace period), stops the group when the command ends, and sets ``PR_SET_PDEATHSIG`` (Linux) for
a SIGKILL of this process. ``exec`` would not do: the server's helpers would outlive it."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

PR_SET_PDEATHSIG = 1                    # prctl option: the signal sent when the parent dies
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL_SECONDS = 0.2


def set_parent_death_signal(signum: int = signal.SIGTERM) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies (Linux only)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)


def proc_stat(pid: int) -> list[str]:
    """Fields of ``/proc/<pid>/stat`` after the command name: state, ppid, process group, ...
    start time (19)."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    return text.rsplit(")", 1)[1].split()


def group_running(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (zombies, which have ended, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc/self/stat").is_file():
        return True
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, _, group = proc_stat(int(entry.name))[:3]
            if int(group) == pgid and state != "Z":
                return True
    return False


def stop_group(child: subprocess.Popen, grace: float) -> None:
    """SIGTERM the process group led by ``child``, SIGKILL it after ``grace`` seconds; return
    once none of its processes runs (or after another ``grace`` seconds past the SIGKILL)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            child.poll()                          # reap the leader, which is our child
            if not group_running(child.pid):
                return
            time.sleep(POLL_SECONDS)


class _StopRequest:
    """The first stop signal received (a handler that only records it)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: object) -> None:
        self.signum = self.signum or signum


def run_group(cmd: Sequence[str], env: Mapping[str, str] | None = None,
              grace: float = 5.0) -> int | None:
    """Run ``cmd`` as its own process group until it ends or a stop signal arrives, then stop
    the whole group (:func:`stop_group`). Returns the command's exit status when it ended by
    itself, or None when a signal stopped it."""
    request = _StopRequest()
    previous = {signum: signal.signal(signum, request) for signum in STOP_SIGNALS}
    child = None
    try:
        child = subprocess.Popen(list(cmd), env=None if env is None else dict(env),
                                 process_group=0, preexec_fn=set_parent_death_signal)
        while child.poll() is None and request.signum is None:
            time.sleep(POLL_SECONDS)
        return None if request.signum else child.returncode
    finally:
        if child is not None:
            stop_group(child, grace)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
