"""Whether the benchmark's numbers can be believed: the machine did not change under them.

A training speed is compared with a roofline made of GEMM rates measured in the same process.
On a machine shared with other work both move, and not together: the GEMM rate measured while
another job ran can be a tenth of the idle one, and training measured a moment later then reads
as several times the roofline. So the fp32 GEMM rate is measured before and after each model's
training windows, and the run is refused (exit 2, ``bench.json`` and ``bench.md`` left as they
were) when

- the two rates differ by more than :data:`MAX_GEMM_DRIFT` of the first, or
- a model's training exceeds its fp32 roofline (a ratio above 100% is a measurement error).

The load average before and after is recorded beside the numbers in every case. A refused run's
numbers are kept apart, in ``bench.refused.json`` with the reasons under ``refused``, so that
what went wrong can be looked at (:func:`check`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rnnsearch.data.textio import write_json
from rnnsearch.errors import StageError

REFUSED_NAME = "bench.refused.json"   # where a refused run's numbers go, beside the reports

MAX_GEMM_DRIFT = 0.20     # the largest accepted change of the GEMM rate over a measurement


class UnreliableBench(StageError):
    """The machine changed during the measurement; the numbers would mislead."""


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def gemm_drift(before: float, after: float) -> float:
    """The relative change of the GEMM rate over a measurement: |after - before| / before."""
    return abs(after - before) / before


def problems(models: dict[str, dict[str, Any]]) -> list[str]:
    """Why the training numbers of ``models`` (``bench.json``'s ``models``) cannot be trusted;
    empty when they can."""
    found = []
    for name, m in models.items():
        before, after = m.get("gemm_gflops_fp32_before"), m["gemm_gflops_fp32"]
        if before is not None and gemm_drift(before, after) > MAX_GEMM_DRIFT:
            found.append(f"training {name}: the fp32 GEMM rate moved from {before:.0f} to "
                         f"{after:.0f} GFLOP/s during the measurement (more than "
                         f"{MAX_GEMM_DRIFT:.0%})")
        if m["roofline_fraction_fp32"] > 1.0:
            found.append(f"training {name}: {m['roofline_fraction_fp32']:.0%} of the fp32 GEMM "
                         "roofline, which no training step can reach")
    return found


def check(results: dict[str, Any], out: Path) -> None:
    """Raise :class:`UnreliableBench` naming every problem (see :func:`problems`), after writing
    the run's numbers and the problems (key ``refused``) to :data:`REFUSED_NAME` in ``out``; a
    run that passes removes an earlier run's refused numbers there."""
    found = problems(results["models"])
    kept = out / REFUSED_NAME
    if not found:
        kept.unlink(missing_ok=True)
        return
    write_json(kept, {**results, "refused": found})
    load = results["machine"].get("load_average_before")
    raise UnreliableBench(
        "; ".join(found) + f". The machine was busy (load average {load} at the start, "
        f"{os.cpu_count()} cores): the reports are left as they were, this run's numbers are "
        f"in {kept}; rerun make bench with the machine to itself")
