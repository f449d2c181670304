"""Shared fixtures: the repository root, the corpora mirror, and running stage scripts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPORA = (REPO.parent / "shared" / "corpora").resolve()


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path_factory, monkeypatch):
    """Every test logs to its own throw-away SQLite store, never the project's mlflow.db."""
    store = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    yield


@pytest.fixture
def mirror() -> Path:
    """The read-only corpora mirror beside the checkout (../shared/corpora)."""
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    return SHARED_CORPORA


def run_script(script: str, *args: str, cwd: Path = REPO, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """Run ``pipeline/<script>`` with the project's interpreter; capture its output."""
    full_env = dict(os.environ, PYTHONPATH=str(REPO / "src"), **(env or {}))
    return subprocess.run([sys.executable, str(REPO / "pipeline" / script), *args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=600)
