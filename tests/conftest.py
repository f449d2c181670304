"""Shared fixtures: the repository root, the corpora mirror, a local HTTP server, and running
stage scripts."""
from __future__ import annotations

import contextlib
import functools
import http.server
import importlib
import importlib.util
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPORA = (REPO.parent / "shared" / "corpora").resolve()


# The files that take minutes, longest first. ``make test`` hands test files to its workers in
# collection order (pytest-xdist ``--dist loadfile --no-loadscope-reorder``), so these start
# first and the short files fill the other worker meanwhile, instead of one of them starting
# last and running alone at the end. (Approximate minutes on 2 cores: 6, 3, 2, 1, 1, 1.)
SLOW_FILES = ("test_pipeline_e2e.py", "test_faults.py", "test_resume_exact.py",
              "test_bench_device.py", "test_mlflow_ui_browser.py", "test_report.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of :data:`SLOW_FILES` first, in that order; the rest as collected (the sort is
    stable, and every worker sorts alike)."""
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return SLOW_FILES.index(name) if name in SLOW_FILES else len(SLOW_FILES)

    items.sort(key=rank)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``make test`` (pytest-xdist workers) every worker, and every process it starts,
    gets its share of the cores as its thread count (``OMP_NUM_THREADS``, unless set already):
    two workers each starting torch processes with one thread per core would have their
    threads wait on each other, several times slower than one thread each."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(scope="session")
def _empty_mlflow_store(tmp_path_factory) -> Path | None:
    """An empty MLflow store whose tables MLflow itself created (its schema migrations take
    about 2 s; every test copies this file instead of migrating a store of its own); None
    where MLflow is not installed (a GPU box with the minimal install that the GPU check
    needs: nothing there can log to a store)."""
    if importlib.util.find_spec("mlflow") is None:
        return None
    store = tmp_path_factory.mktemp("mlflow-empty") / "mlflow.db"
    subprocess.run([sys.executable, "-c", "import sys, mlflow; "
                    "mlflow.MlflowClient(sys.argv[1]).search_experiments()", f"sqlite:///{store}"],
                   check=True, capture_output=True)
    return store


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path_factory, monkeypatch, _empty_mlflow_store):
    """Every test logs to its own throw-away SQLite store (a copy of the empty one), never the
    project's mlflow.db. Tests of a store's creation point MLFLOW_TRACKING_URI elsewhere."""
    if _empty_mlflow_store is None:
        yield
        return
    store = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    shutil.copyfile(_empty_mlflow_store, store)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    yield


@pytest.fixture
def mirror() -> Path:
    """The read-only corpora mirror beside the checkout (../shared/corpora)."""
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    return SHARED_CORPORA


@contextlib.contextmanager
def http_server(handler: Callable[..., http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 (a free port, a thread) answering with ``handler``; yields
    its base URL and stops it afterwards."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    """Serves a folder and logs no request (a stage run in this process shares its stderr)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_root(tmp_path):
    """A directory served over HTTP on 127.0.0.1 (a free port, a thread), stopped after the
    test; yields (directory, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(QuietFiles, directory=str(root))
    with http_server(handler) as url:
        yield root, url


STAGE_CALL = re.compile(r'run_stage\("(\w+)"\)')


def run_script(script: str, *args: str, cwd: Path = REPO, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """Run ``pipeline/<script>`` with ``args`` in ``cwd`` (``env`` added to the environment) in
    this process, through the stage runner's ``run`` that the script calls (the same parsing,
    locks, messages and exit status, without a new interpreter's seconds of imports); capture
    its exit status, stdout and stderr."""
    from rnnsearch.stages.runner import run

    name = STAGE_CALL.search((REPO / "pipeline" / script).read_text()).group(1)
    stage = importlib.import_module(f"rnnsearch.stages.{name}").STAGE
    return run_here(lambda: run(stage, list(args)), [script, *args], cwd, env)


def run_here(command: Callable[[], int], args: list[str], cwd: Path, env: dict | None = None
             ) -> subprocess.CompletedProcess:
    """Call ``command`` (a command's ``main``, returning its exit status) in ``cwd`` with
    ``env`` added to the environment, as a process would run it: its exit status (argparse's
    ``SystemExit`` included; 1 with the traceback for a bug), stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with in_place(cwd, env or {}), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), warnings_to(err):
        try:
            status = command()
        except SystemExit as stop:            # argparse's usage errors
            status = stop.code if isinstance(stop.code, int) else 1
        except Exception:                     # a bug: its traceback, as the interpreter prints it
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess(args, status, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def warnings_to(stream: io.StringIO) -> Iterator[None]:
    """Log records of WARNING and above also written to ``stream`` as their bare message, as a
    stage process's logging prints them (``logging.lastResort``: the stages add no handler;
    here pytest's capture handlers on the root logger would take them instead)."""
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)


@contextlib.contextmanager
def in_place(cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """Run the block in ``cwd`` with ``env`` added to the environment, as a stage process would
    start; the working directory, the environment and torch's thread count are put back after."""
    import torch

    before, threads = dict(os.environ), torch.get_num_threads()
    os.environ.update(env)
    with contextlib.chdir(cwd):
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(before)
            torch.set_num_threads(threads)


def project_env(root: Path) -> dict[str, str]:
    """The environment a stage of the project copy at ``root`` runs in (venv first on PATH)."""
    venv_bin = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=str(root / "src"), RNNSEARCH_ROOT=str(root))


def run_in(cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1500
           ) -> subprocess.CompletedProcess:
    """Run ``cmd`` in the project copy ``cwd``; with ``check``, fail showing its output."""
    result = subprocess.run(cmd, cwd=cwd, env=project_env(cwd), capture_output=True, text=True,
                            timeout=timeout)
    if check:
        assert result.returncode == 0, (f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n"
                                        f"{result.stderr[-3000:]}")
    return result


def make_project(root: Path, overrides: dict[str, Any]) -> Path:
    """A git repository at ``root`` holding the tracked project files (no data, no outputs)
    and the repository's params.yaml with ``overrides`` merged over it."""
    from rnnsearch.config.trees import merge

    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file() and not name.startswith(("metrics/", "plots/", "reports/")):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    params = merge(yaml.safe_load((REPO / "params.yaml").read_text()), overrides)
    params["prepare"]["mirror"] = str(SHARED_CORPORA)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", "commit",
                 "-qm", "copy"]):
        run_in(cmd, root)
    return root
