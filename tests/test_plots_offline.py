"""The DVC plots page (``dvc plots show`` / ``dvc plots diff``) renders without a network: the
project's template (``.dvc/plots.html``, ``plots.html_template`` in ``.dvc/config``) carries
Vega, Vega-Lite and Vega-Embed inline instead of loading them from a CDN."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from dvc_render.vega import VegaRenderer

from conftest import REPO
from test_mlflow_ui_browser import CHROMIUM_FLAGS, find_chromium

DVC = str(Path(sys.executable).parent / "dvc")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """``dvc plots show`` of the committed run's plots, written to a temporary folder."""
    out = tmp_path_factory.mktemp("plots")
    done = subprocess.run([DVC, "plots", "show", "-o", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out / "index.html"


def test_the_template_inlines_the_libraries_dvc_render_would_fetch():
    wanted = re.findall(r"npm/([a-z-]+@[0-9.]+)", VegaRenderer.SCRIPTS)
    inlined = re.findall(r"<script>/\* ([a-z-]+@[0-9.]+) \*/", (REPO / ".dvc/plots.html").read_text())
    assert wanted == inlined == ["vega@5.20.2", "vega-lite@5.2.0", "vega-embed@6.18.2"]


def test_the_page_loads_no_script_from_the_network(page):
    html = page.read_text(encoding="utf-8")
    assert "vegaEmbed(" in html and "<script src=" not in html and "cdn.jsdelivr" not in html


def test_every_plot_renders_in_a_browser_without_a_network(page, tmp_path):
    """Headless Chromium, every host name unresolvable: each plot's div gets its drawing."""
    browser = find_chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=180).stdout
    plots = re.findall(r'<div id="(plots_[^"]+)"', dom)
    drawn = re.findall(r"<canvas|<svg[^>]*class=\"marks\"", dom)
    assert len(plots) >= 6 and "bleu_by_length" in " ".join(plots), plots
    assert len(drawn) == len(plots), (len(drawn), plots)
