"""A DVC stage's command (``pipeline/<script>.py``) run in a fresh process, outside the pipeline.

For the commands beside ``stages/`` (the bench, the studies) that need a stage's outputs for
params of their own: they run the stage as ``dvc repro`` would, through its script, instead of
importing its module, so that only ``stages/`` runs a stage. Its MLflow runs go to a store of
the caller's choosing, leaving the project's own store alone.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rnnsearch.config.repository import repo_root
from rnnsearch.errors import EXIT_ERROR, EXIT_INTERRUPTED, ChildCrashed, DataError


def run_stage_command(script: str, params: Path, mlflow_store: Path, *args: str,
                      label: str = "stage") -> None:
    """``pipeline/<script> --params <params> <args>`` in the repository, logging to the MLflow
    SQLite store ``mlflow_store``; prints the command after ``<label>: ``. A failure (its error
    is on stderr above) raises, naming the script: :class:`DataError` for the stage's own
    one-line error (exit 2), ``KeyboardInterrupt`` for Ctrl-C, :class:`ChildCrashed` for a bug
    (so that the caller exits 1 as the stage did, not as if the input were bad)."""
    root = repo_root()
    env = dict(os.environ, PYTHONPATH=str(root / "src"),
               MLFLOW_TRACKING_URI=f"sqlite:///{mlflow_store.resolve()}")
    command = [sys.executable, str(root / "pipeline" / script), "--params", str(params), *args]
    print(f"{label}: {' '.join(command[1:])}", flush=True)
    done = subprocess.run(command, cwd=root, env=env)
    if done.returncode == EXIT_ERROR:
        raise DataError(f"pipeline/{script} failed (exit {done.returncode}; its error is above)")
    if done.returncode == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    if done.returncode:
        raise ChildCrashed(f"pipeline/{script} crashed (exit {done.returncode}; its traceback "
                           f"is above)")
