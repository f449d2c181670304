"""MLflow tracking: the one place that owns the tracking URI, the experiment and the run tags.

URI: ``MLFLOW_TRACKING_URI``, else an absolute ``sqlite:///<repo root>/mlflow.db`` (absolute so
that DVC experiments run in ``.dvc/tmp/exps/...`` land in the main store).
``python -m rnnsearch.tracking ui`` (``make ui``) serves the MLflow UI, its processes ending with
it (:mod:`rnnsearch.procgroup`), without MLflow's job execution (:data:`JOB_EXECUTION_ENV`).
MLflow 3.17's UI picks its landing page from a sidebar switch, not the experiment's kind tag,
hence ``?workflowType=machine_learning`` and :mod:`rnnsearch.ui_app`."""
from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.repository import repo_root
from rnnsearch.config.trees import flatten

DEFAULT_EXPERIMENT = "rnnsearch"
KIND_TAG = "mlflow.experimentKind"          # MLflow's experiment tag for the kind of work
KIND_MODEL_TRAINING = "custom_model_development"   # its value for model training (not GenAI)
_KIND_CHECKED: set[tuple[str, str]] = set()  # (URI, experiment id) already tagged this process
# MLflow's switch for its server's job runner: seven huey consumers for GenAI jobs (scorers,
# prompt optimisation) that a UI of training runs never uses. Off for ``make ui`` unless set.
JOB_EXECUTION_ENV = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"
REPLICATE_NAME = re.compile(r"^(?P<system>.+)-seed(?P<seed>\d+)$")
_REPLICATE: dict[str, str] = {}     # {grid cell: its replicate's name} inside replicate_of()


def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else an absolute SQLite store at the repository root."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{repo_root() / 'mlflow.db'}"


def experiment_name() -> str:
    """``MLFLOW_EXPERIMENT_NAME`` if set, else ``rnnsearch``."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_EXPERIMENT)


def git_commit() -> str:
    """The current git commit, or ``unknown`` outside a repository."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=repo_root(), check=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def replicate_cell(cell: str, seed: int) -> str:
    """Name of ``cell``'s replicate trained with ``seed``: ``search-50-seed2`` (dvc.yaml's
    ``train_seed`` stages; the cell itself, trained with ``train.seed``, is the first replicate)."""
    return f"{cell}-seed{seed}"


def split_replicate(name: str) -> tuple[str, int | None]:
    """``(system, seed)`` of a cell name: ``search-50-seed2`` -> ``("search-50", 2)``; a grid
    cell's own name -> ``(name, None)`` (its seed is ``train.seed``)."""
    match = REPLICATE_NAME.match(name)
    return (match["system"], int(match["seed"])) if match else (name, None)


@contextlib.contextmanager
def replicate_of(cell: str, seed: int) -> Iterator[None]:
    """Inside, the runs of grid cell ``cell`` are its replicate trained with ``seed``: named and
    tagged ``cell=<cell>-seed<seed>`` (:func:`replicate_cell`)."""
    _REPLICATE.update({cell: replicate_cell(cell, seed)})
    try:
        yield
    finally:
        _REPLICATE.clear()


def run_tags(stage: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags every run gets: stage, git commit and (under ``dvc exp run``) the experiment;
    a grid cell's runs also ``system`` (the cell its replicates share, e.g. ``search-50``) and,
    for training, the ``seed``, so that a system's replicates are selected together."""
    commit = git_commit()
    tags = {"stage": stage, "git_commit": commit, "mlflow.source.git.commit": commit,
            **environment_tags()}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    tags.update(extra or {})
    if "cell" in tags:
        tags["cell"] = _REPLICATE.get(tags["cell"], tags["cell"])
        system, seed = split_replicate(tags["cell"])
        tags["system"] = system
        seed_text = str(seed) if seed is not None else os.environ.get("PL_GLOBAL_SEED")
        if seed_text is not None:         # Lightning's seed_everything sets it for training
            tags["seed"] = seed_text
    return tags


def experiment_run_name(name: str) -> str:
    """A run's name, led by its DVC experiment's under ``dvc exp run`` (``deen/search-50``), so
    that runs of two experiments sharing the store tell apart in the runs table."""
    name = _REPLICATE.get(name, name)
    experiment = os.environ.get("DVC_EXP_NAME")
    return f"{experiment}/{name}" if experiment else name


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise a SQLite store's first use across processes: MLflow creates (or migrates) its
    tables unlocked, so of two stages started together on a new ``mlflow.db`` one would die with
    ``table runs already exists``. Other stores need no lock."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    database = Path(uri.removeprefix("sqlite:///"))
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(database.with_name(database.name + ".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def environment_tags() -> dict[str, str]:
    """The machine and numeric libraries (see :mod:`rnnsearch.environment`) as
    ``env.<name>`` tags, so runs whose last digits differ can be told apart in the UI."""
    from rnnsearch.environment import describe_environment

    flat = flatten(describe_environment())
    return {f"env.{key}": str(value) for key, value in flat.items()}


def configure() -> None:
    """Point the ``mlflow`` client at :func:`tracking_uri` and :func:`experiment_name`, opening
    the store and creating the experiment (tagged as model training) under :func:`store_lock`."""
    import mlflow

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    name = experiment_name()
    with store_lock(uri):
        if uri.startswith("sqlite:") and mlflow.get_experiment_by_name(name) is None:
            # Artifacts beside the store, by absolute path, whatever the working directory.
            location = (repo_root() / "mlartifacts").as_uri()
            mlflow.create_experiment(name, artifact_location=location,
                                     tags={KIND_TAG: KIND_MODEL_TRAINING})
        mark_model_training(mlflow.set_experiment(name), uri)


def mark_model_training(experiment: Any, uri: str) -> None:
    """Tag ``experiment`` (an ``mlflow.entities.Experiment``) as model training unless it is
    already tagged (an older store, or one created by another tool); once per process."""
    import mlflow

    key = (uri, experiment.experiment_id)
    if key in _KIND_CHECKED:
        return
    if KIND_TAG not in experiment.tags:     # a kind someone chose by hand is left alone
        mlflow.MlflowClient(uri).set_experiment_tag(experiment.experiment_id, KIND_TAG,
                                                    KIND_MODEL_TRAINING)
    _KIND_CHECKED.add(key)


@contextlib.contextmanager
def start_run(stage: str, params: Any = None, run_name: str | None = None,
              tags: Mapping[str, str] | None = None) -> Iterator[Any]:
    """Start an MLflow run for ``stage`` with the standard tags and (flattened) ``params``."""
    import mlflow

    configure()
    with mlflow.start_run(run_name=experiment_run_name(run_name or stage),
                          tags=run_tags(stage, tags)) as run:
        if params is not None:
            mlflow.log_params(flatten(params))
        yield run


def log_numeric_metrics(metrics: Mapping[str, Any], prefix: str = "") -> None:
    """Log every numeric leaf of a nested metrics dict as ``prefix/a/b``."""
    import mlflow

    flat = {}
    for key, value in flatten(dict(metrics)).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}".replace(".", "/")] = float(value)
    if flat:
        mlflow.log_metrics(flat)


def runs_path() -> str:
    """The path (from the UI's root) of the experiment's runs table, in the Model training view
    (``workflowType``, module docstring); creates the store and experiment when missing."""
    import mlflow

    configure()
    experiment = mlflow.get_experiment_by_name(experiment_name())
    return f"/#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"


def port_problem(host: str, port: int) -> str | None:
    """Why a server cannot listen on ``host``:``port`` (port in use, unknown host), or None. Binds
    as uvicorn will (``SO_REUSEADDR``: a port left in TIME_WAIT is free, a listened-on one not)."""
    if port > 65535:
        return f"--port {port}: a TCP port is at most 65535"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except socket.gaierror as err:
        return f"--host {host}: unknown host ({err.strerror})"
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            return (f"port {port} on {host} is already in use (another MLflow UI?): stop what "
                    f"listens there, or choose another port: make ui PORT={port + 1}")
        return f"cannot listen on {host}:{port}: {err.strerror or err}"
    return None


def _serve(args: argparse.Namespace) -> int:
    """Serve the ``rnnsearch-ui`` app (:mod:`rnnsearch.ui_app`) on the project's store in the
    foreground until SIGTERM, Ctrl-C or a closed terminal stops it and every process it started.
    Exit status 2, with one line, when the port is taken or the server stops by itself."""
    from rnnsearch.procgroup import run_group
    from rnnsearch.ui_app import LANDING_ENV

    problem = port_problem(args.host, args.port)
    if problem:
        print(f"ui: error: {problem}", file=sys.stderr)
        return 2
    root = repo_root()
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", tracking_uri(),
           "--default-artifact-root", str(root / "mlartifacts"), "--app-name", "rnnsearch-ui",
           "--workers", "1", "--host", args.host, "--port", str(args.port)]
    base = f"http://{args.host}:{args.port}"
    landing = runs_path()
    print(f"MLflow UI on {base}  (store: {tracking_uri()}; it opens on the runs)", flush=True)
    print(f"Stop it with Ctrl-C or: kill {os.getpid()}  (the server and every process it "
          f"started stop with it)", flush=True)
    print(f"Runs of '{experiment_name()}': {base}{landing}", flush=True)
    env = {JOB_EXECUTION_ENV: "false", **os.environ, LANDING_ENV: landing}
    status = run_group(cmd, env=env)
    if status is None:
        print("MLflow UI stopped", flush=True)
        return 0
    print(f"ui: error: the MLflow server on {base} stopped by itself (exit status {status}); "
          "its last lines above say why", file=sys.stderr)
    return 2


@entry_point("ui")
def main(argv: list[str] | None = None) -> int:
    """``python -m rnnsearch.tracking ui|uri``."""
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.tracking")
    sub = parser.add_subparsers(dest="command", required=True)
    ui = sub.add_parser("ui", help="start the MLflow UI on the project's tracking store")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=at_least(0), default=5000)
    sub.add_parser("uri", help="print the tracking URI")
    args = parser.parse_args(argv)
    if args.command == "uri":
        print(tracking_uri())
        return 0
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
