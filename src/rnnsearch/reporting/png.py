"""Figures written as PNG files that a rerun writes byte for byte the same."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")   # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def save_figure(figure: Figure, path: Path) -> None:
    """Write ``figure`` as PNG (no software tag: a rerun gives the same bytes) and close it."""
    figure.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(figure)
