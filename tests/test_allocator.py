"""rnnsearch.allocator: glibc keeps freed memory for reuse, in the processes that train."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

# A process that allocates and frees blocks of 1 to 30 MB, three times over, then prints
# whether the settings were made and its minor page faults (memory the kernel mapped in).
CHURN = """
import resource
from rnnsearch.allocator import keep_freed_memory
kept = keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    for megabytes in range(1, 31):
        block = bytearray(megabytes << 20)     # zero-filled: every page is touched
        del block
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def churn(**env: str) -> tuple[bool, int]:
    """(settings made, page faults) of :data:`CHURN` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", CHURN], capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(REPO / "src"), **env})
    kept, faults = done.stdout.split()
    return kept == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_memory_is_reused_without_faulting_it_in_again():
    """With glibc's defaults each block larger than the ones before it is mapped afresh
    (465 MB of pages, about 119,000 faults); with the settings every block reuses the heap,
    which grows once to 30 MB (about 7,700)."""
    kept, faults_kept = churn()
    system, faults_system = churn(RNNSEARCH_MALLOC="system")
    assert kept and not system
    assert faults_system > 60_000 and faults_kept < 20_000, (faults_kept, faults_system)


def test_every_stage_and_the_bench_set_it_before_their_work():
    """The stage runner sets it before it imports the stage, the bench's measurement
    processes before they measure."""
    runner = (REPO / "src/rnnsearch/stages/runner.py").read_text()
    body = runner[runner.index("def main(name: str)"):]
    assert body.index("keep_freed_memory()") < body.index("importlib.import_module")
    worker = (REPO / "src/rnnsearch/bench/worker.py").read_text()
    assert "keep_freed_memory()" in worker[worker.index("def start("):]
