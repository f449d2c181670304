"""What ``dvc metrics show`` and ``dvc plots show`` give a user on the committed default run:
a metrics table that fits a terminal, headline numbers readable, every plot once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

DVC = str(Path(sys.executable).parent / "dvc")
WIDTH = 200


def dvc(*args: str) -> str:
    done = subprocess.run([DVC, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="400"))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_dvc_metrics_show_of_the_summary_fits_a_terminal_and_shows_the_headline_numbers():
    """README's command for the headline numbers (plain ``dvc metrics show`` also lists the
    train and search_error metrics, which DVC's run cache needs declared as metrics)."""
    table = dvc("metrics", "show", "metrics/summary").splitlines()
    assert max(len(line) for line in table) <= WIDTH, max(table, key=len)
    header = table[0].split()
    assert {"bleu", "bleu_no_unk", "dev_ppl"} <= set(header)
    rows = {line.split()[0]: line.split()[1:] for line in table[1:] if line.strip()}
    search = rows["metrics/summary/search-50.json"]
    committed = json.loads((REPO / "metrics/eval/search-50.json").read_text())
    assert f"{committed['systems']['beam']['all']['bleu']:g}" in search
    assert "metrics/summary/lm.json" in rows


def test_dvc_plots_show_lists_each_plot_once():
    plots = list(json.loads(dvc("plots", "show", "--json"))["data"])
    names = [name.split("::")[-1] for name in plots]
    assert len(names) == len(set(names)), plots
    assert {"plots/lengths.csv", "plots/gradient_flow.csv"} <= set(names)


def test_each_bleu_by_length_chart_is_titled_with_its_cell():
    plots = json.loads(dvc("plots", "show", "--json"))["data"]
    charts = {name: entries for name, entries in plots.items() if "bleu_by_length/" in name}
    assert charts
    for name, entries in charts.items():
        cell = Path(name).stem
        title = entries[0]["content"]["title"]
        assert cell in (title["text"] if isinstance(title, dict) else title), (name, title)
