"""rnnsearch.allocator: glibc keeps freed memory for reuse, in the processes that train."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

# A process that allocates and frees blocks of 1 to 30 MB and of 40 and 50 MB (above the largest
# mmap threshold glibc accepts), writing to every page, three times over, then prints whether the
# settings were made and the minor page faults (memory the kernel mapped in) of the second and
# third rounds, when every size has been allocated once before.
CHURN = """
import resource
from rnnsearch.allocator import keep_freed_memory
kept = keep_freed_memory()
for round in range(3):
    if round == 1:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for megabytes in [*range(1, 31), 40, 50]:
        block = bytearray(megabytes << 20)
        block[::4096] = bytes(len(block[::4096]))
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
    """With glibc's defaults, and with an mmap threshold alone (32 MB at most), the 40 and 50 MB
    blocks are mapped afresh every time (the last two rounds: 2 x 90 MB of pages, about 46,000
    faults; 54,000 with the defaults); with the settings every block reuses the heap the first
    round grew, so those rounds fault next to nothing (none, measured)."""
    kept, faults_kept = churn()
    system, faults_system = churn(RNNSEARCH_MALLOC="system")
    assert kept and not system
    assert faults_system > 40_000 and faults_kept < 2_000, (faults_kept, faults_system)


def test_every_stage_and_the_bench_set_it_before_their_work():
    """The stage runner sets it before it imports the stage, the bench before it measures."""
    runner = (REPO / "src/rnnsearch/stages/runner.py").read_text()
    body = runner[runner.index("def main(name: str)"):]
    assert body.index("keep_freed_memory()") < body.index("importlib.import_module")
    bench = (REPO / "src/rnnsearch/bench/__main__.py").read_text()
    body = bench[bench.index("def main("):]
    assert body.index("keep_freed_memory()") < body.index("bench(device, args)")
