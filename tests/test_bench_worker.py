"""A measurement process ends with the benchmark, however the benchmark is stopped."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

# the benchmark's way of running a measurement, here one that would sleep for two minutes
BENCH = ("import time\n"
         "from rnnsearch.bench.__main__ import _in_fresh_process\n"
         "_in_fresh_process(time.sleep, 120, uses_torch=False)\n")


def measurement_processes(parent: int) -> list[int]:
    """The pids of ``parent``'s children that run a multiprocessing worker."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an ended process nobody has reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for(condition, seconds: float):
    """``condition()``'s first true value within ``seconds``, else the last false one."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
def test_a_killed_benchmark_takes_its_measurement_process_with_it():
    bench = subprocess.Popen([sys.executable, "-c", BENCH], cwd=REPO)
    try:
        workers = wait_for(lambda: measurement_processes(bench.pid), 120)
        assert workers, "the measurement process did not start"
    finally:
        bench.kill()                  # SIGKILL: nothing in the benchmark runs after it
        bench.wait()
    ended = wait_for(lambda: not any(running(pid) for pid in workers), 30)
    assert ended, f"measurement process {workers} outlived the benchmark"
