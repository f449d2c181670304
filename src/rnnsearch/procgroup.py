"""Run a command as its own process group that ends when this process is stopped.

:func:`run_group` turns SIGTERM, SIGINT and SIGHUP into SIGTERM to the group (or SIGINT, for a
command that cleans up only on Ctrl-C; SIGKILL after a grace period), and stops the group when the
command ends: ``mlflow server`` is a process tree that would outlive a SIGTERM to ``make ui``.
Should this process end running no code of its own (SIGKILL), a watcher (:func:`start_watcher`)
outside the group stops it when a pipe only this process writes to ends. ``PR_SET_PDEATHSIG``
(Linux) on the command is not enough alone: it reaches the command only, which ``mlflow server``
forwards to uvicorn only, leaving its job runner's huey consumers to MLflow's orphan checks,
seconds (tens on a busy machine) late. Nor ``exec``: the server's helpers would outlive it."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Sequence

PR_SET_PDEATHSIG = 1                    # prctl option: the signal sent when the parent dies
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL_SECONDS = 0.2


def set_parent_death_signal(signum: int = signal.SIGTERM) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies (Linux only)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)


def proc_stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat``'s fields after ``(comm)``: state, ppid, pgid, ... start time (19)."""
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


def stop_group(child: subprocess.Popen, grace: float, first: int = signal.SIGTERM) -> None:
    """:func:`kill_group` of the process group led by ``child``, reaping ``child`` meanwhile."""
    kill_group(child.pid, grace, reap=child.poll, first=first)   # reap the leader, our child


def kill_group(pgid: int, grace: float, reap: Callable[[], object] = lambda: None,
               first: int = signal.SIGTERM) -> None:
    """Send ``first`` (SIGTERM) to process group ``pgid``, SIGKILL it after ``grace`` seconds;
    return once none of its processes runs (or ``grace`` seconds after the SIGKILL). ``reap`` is
    called while waiting (to reap a leader that is the caller's child)."""
    for signum in (first, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signum)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            if not group_running(pgid):
                return
            time.sleep(POLL_SECONDS)


def watch_group(pgid: int, grace: float, first: int = signal.SIGTERM) -> None:
    """The watcher's body (:func:`start_watcher`): read stdin to its end (the writer closed it or
    ended, SIGKILL included), then stop group ``pgid`` (:func:`kill_group`, by ``first``) if it
    still runs. Ignores SIGINT and SIGHUP: terminal signals are for the process it watches."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    while os.read(sys.stdin.fileno(), 4096):
        pass
    if group_running(pgid):
        kill_group(pgid, grace, first=first)


def start_watcher(pgid: int, grace: float, first: int = signal.SIGTERM
                  ) -> tuple[subprocess.Popen, int]:
    """Start a watcher of process group ``pgid`` in a group of its own (signals to this process's
    group or to ``pgid`` miss it); return it and the write end of its stdin, held by this process
    alone (not inherited). Closing that end, or this process ending, makes the watcher stop the
    group (:func:`watch_group`, by ``first``) and exit."""
    read_end, write_end = os.pipe()
    code = (f"from rnnsearch.procgroup import watch_group; "
            f"watch_group({pgid}, {grace!r}, {int(first)})")
    source = str(Path(__file__).resolve().parents[1])       # where this package is imported from
    path = os.pathsep.join(filter(None, (source, os.environ.get("PYTHONPATH"))))
    try:
        watcher = subprocess.Popen([sys.executable, "-c", code], stdin=read_end,
                                   env=dict(os.environ, PYTHONPATH=path), process_group=0)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return watcher, write_end


class _StopRequest:
    """The first stop signal received (a handler that only records it)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: object) -> None:
        self.signum = self.signum or signum


def run_group(cmd: Sequence[str], env: Mapping[str, str] | None = None,
              grace: float = 5.0, cwd: str | Path | None = None,
              interrupt: bool = False) -> int | None:
    """Run ``cmd`` as its own process group until it ends or a stop signal arrives, then stop the
    group (:func:`stop_group`) by SIGTERM, or with ``interrupt`` by SIGINT (as Ctrl-C) whatever
    signal came, for a command that cleans up only on Ctrl-C (``dvc exp run`` leaves its temporary
    copy on SIGTERM). A watcher (:func:`start_watcher`) does the same should this process die
    first (SIGKILL). Returns the command's exit status, or None when a signal stopped it."""
    request, stop_signal = _StopRequest(), signal.SIGINT if interrupt else signal.SIGTERM
    previous = {signum: signal.signal(signum, request) for signum in STOP_SIGNALS}
    child = watcher = None
    pipe = -1
    try:
        child = subprocess.Popen(list(cmd), env=None if env is None else dict(env), cwd=cwd,
                                 process_group=0,
                                 preexec_fn=partial(set_parent_death_signal, stop_signal))
        watcher, pipe = start_watcher(child.pid, grace, stop_signal)
        while child.poll() is None and request.signum is None:
            time.sleep(POLL_SECONDS)
        return None if request.signum else child.returncode
    finally:
        if child is not None:
            stop_group(child, grace, stop_signal)
        if watcher is not None:
            os.close(pipe)                  # the group is gone: the watcher just exits
            watcher.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
