"""``make ui`` opens on the experiment's runs (not MLflow 3's GenAI "Traces" overview), seen in a
real headless Chromium; and the experiment is tagged as model training, old stores included. On a
port already in use it stops at once naming the port; SIGTERM to ``make ui`` stops the server and
every process it started.

The browser test skips when no Chromium is installed (``apt-get install chromium``).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import mlflow
import psutil
import pytest

from rnnsearch import tracking

REPO = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Run names as the stages give them: the stage, a grid cell (train), evaluate-<cell>.
RUN_NAMES = ("prepare", "tokenize", "search-20", "evaluate-search-20", "report")


def find_chromium() -> str | None:
    """A Chromium (or Chrome) binary: ``$CHROMIUM`` if set, else the first one on ``PATH``."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def log_stage_runs() -> None:
    """A few runs the way the stages log them (``tracking.start_run``), into the test's store."""
    with tracking.start_run("prepare", {"corpus": "multi30k"}):
        tracking.log_numeric_metrics({"pairs": {"train": 800, "dev": 60}})
    with tracking.start_run("tokenize", {"vocab_size_tgt": 400}):
        tracking.log_numeric_metrics({"vocab_size": {"tgt": 400}})
    with tracking.start_run("train", {"model": "search"}, run_name="search-20",
                            tags={"cell": "search-20"}):
        for step, loss in enumerate((5.9, 5.1, 4.6, 4.3)):
            mlflow.log_metric("train/loss", loss, step=step * 12)
    with tracking.start_run("evaluate", run_name="evaluate-search-20", tags={"cell": "search-20"}):
        for step, bleu in ((10, 21.0), (20, 17.5), (30, 12.0)):
            mlflow.log_metric("search-20/bleu_by_length", bleu, step=step)
    with tracking.start_run("report"):
        pass


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_runs_address(log: Path, base: str, ui: subprocess.Popen,
                          seconds: float = 180) -> str:
    """Wait until the UI answers at ``base``; return the runs address ``ui`` printed."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert ui.poll() is None, f"the MLflow UI exited early:\n{log.read_text()[-3000:]}"
        printed = re.search(r"^Runs of '[^']*': (\S+)$", log.read_text(), re.M)
        try:
            urllib.request.urlopen(base + "/health", timeout=2)
            if printed:
                return printed.group(1)
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"MLflow UI did not answer at {base}:\n{log.read_text()[-3000:]}")


def stop(ui: subprocess.Popen) -> None:
    """Stop every process of the UI's own group (the command the test started, which stops the
    server's processes itself): TERM, then KILL what is left after 20 s."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        deadline = time.time() + grace
        try:
            os.killpg(ui.pid, sig)
            while time.time() < deadline:
                ui.poll()                    # reap our direct child
                os.killpg(ui.pid, 0)         # raises once the group is empty
                time.sleep(0.2)
        except ProcessLookupError:
            return


def rendered_text(browser: str, url: str, profile: Path) -> tuple[str, str]:
    """The page title and visible text of ``url`` after Chromium has run its scripts."""
    out = subprocess.run([browser, "--headless=new", "--disable-gpu", "--no-sandbox",
                          f"--user-data-dir={profile}", "--virtual-time-budget=30000",
                          "--window-size=1400,900", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180, check=True).stdout
    title = re.search(r"<title>(.*?)</title>", out, re.S)
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", out, flags=re.S)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
    return (title.group(1).strip() if title else ""), text


def test_configure_tags_new_and_old_experiments_as_model_training(monkeypatch):
    tracking.configure()
    assert (mlflow.get_experiment_by_name(tracking.experiment_name()).tags[tracking.KIND_TAG]
            == tracking.KIND_MODEL_TRAINING)
    old = mlflow.create_experiment("from-an-older-store")         # no kind tag
    hand = mlflow.create_experiment("chosen-by-hand", tags={tracking.KIND_TAG: "finetuning"})
    for name in ("from-an-older-store", "chosen-by-hand"):
        monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", name)
        tracking.configure()
    assert mlflow.get_experiment(old).tags[tracking.KIND_TAG] == tracking.KIND_MODEL_TRAINING
    assert mlflow.get_experiment(hand).tags[tracking.KIND_TAG] == "finetuning"


def ui_command(port: int) -> list[str]:
    """``python -m rnnsearch.tracking ui`` on ``port`` of 127.0.0.1, as ``make ui`` runs it."""
    return [sys.executable, "-m", "rnnsearch.tracking", "ui", "--host", "127.0.0.1",
            "--port", str(port)]


def start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own session (so :func:`stop` reaches all it left), output to ``log``."""
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(REPO / "src")), cwd=cwd,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def ui(tmp_path):
    """``python -m rnnsearch.tracking ui`` (as ``make ui`` starts it) on a free port of
    127.0.0.1 over a store holding a few stage runs; yields (base address, printed runs
    address); stopped after the test."""
    log_stage_runs()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "ui.log"
    server = start(ui_command(port), log, tmp_path)
    try:
        yield base, wait_for_runs_address(log, base, server)
    finally:
        stop(server)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_the_bare_ui_address_redirects_to_the_runs_table(ui):
    base, address = ui
    assert address.startswith(f"{base}/?runs#/experiments/")
    assert address.endswith("/runs?workflowType=machine_learning")
    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as answer:
        opener.open(base + "/", timeout=10)
    assert answer.value.code == 302
    assert base + answer.value.headers["Location"] == address
    with urllib.request.urlopen(base + "/health", timeout=10) as health:   # MLflow's own app
        assert health.status == 200


def test_ui_opens_on_the_runs_in_a_headless_browser(ui, tmp_path):
    browser = find_chromium()
    if browser is None:
        pytest.skip(f"no Chromium binary ({', '.join(BROWSERS)} or $CHROMIUM) for the "
                    "headless browser check; install one, e.g. apt-get install chromium")
    base, _ = ui
    title, text = rendered_text(browser, base + "/", tmp_path / "profile")   # the bare address
    assert title.startswith("Runs"), (title, text[:2000])
    assert f"{len(RUN_NAMES)} matching runs" in text, text[:2000]
    for name in RUN_NAMES:
        assert re.search(rf"(^| ){re.escape(name)} ", text), (name, text[:2000])
    # Not the GenAI overview a new experiment opens on in MLflow 3: "Traces 0, no data".
    assert not title.startswith("Overview") and "No data available" not in text


def test_ui_on_a_port_in_use_stops_at_once_naming_the_port(tmp_path):
    with socket.socket() as held:                  # someone else's server on the port
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        log = tmp_path / "ui.log"
        ui = start(ui_command(port), log, tmp_path)
        try:
            status = ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 30 s after the start:\n{log.read_text()[-3000:]}")
        finally:
            stop(ui)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    assert status == 2, lines
    assert "Traceback" not in log.read_text()
    assert f"port {port}" in lines[-1] and "in use" in lines[-1], lines[-1]


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` that still run (a zombie has ended; its parent just has not
    reaped it yet)."""
    running = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
        except psutil.NoSuchProcess:
            pass
    return running


def serves(port: int) -> bool:
    """True while something accepts connections on ``port`` of 127.0.0.1."""
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_to_make_ui_stops_the_server_and_every_process_it_started(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on PATH")
    port = free_port()
    log = tmp_path / "ui.log"
    # -o: never reinstall the venv here; PY: the interpreter running the tests.
    ui = start([make, "-s", "-C", str(REPO), "-o", ".venv/.installed", "ui", f"PORT={port}",
                f"PY={sys.executable}"], log, tmp_path)
    tree: list[psutil.Process] = []
    try:
        wait_for_runs_address(log, f"http://127.0.0.1:{port}", ui)
        tree = psutil.Process(ui.pid).children(recursive=True)
        os.kill(ui.pid, signal.SIGTERM)                 # make's process, not its group
        deadline = time.time() + 15
        while time.time() < deadline and (serves(port) or alive(tree)):
            time.sleep(0.2)
        assert not serves(port), f"still serving on {port}:\n{log.read_text()[-3000:]}"
        assert not alive(tree), [p.cmdline() for p in alive(tree)]
        assert ui.wait(timeout=5) is not None
    finally:
        stop(ui)
        for process in alive(tree):
            process.kill()
