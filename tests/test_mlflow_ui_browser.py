"""``make ui`` opens on the experiment's runs (not MLflow 3's GenAI "Traces" overview), and a deep
link to a run opens that run, both in the model-training view, seen in a real headless Chromium;
and the experiment is tagged as model training, old stores included. On a port already in use it
stops at once naming the port; SIGTERM to ``make ui`` stops the server and every process it
started.

The browser tests skip when no Chromium is installed (``apt-get install chromium``).
"""
from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, NamedTuple

import mlflow
import psutil
import pytest

from rnnsearch import tracking, ui_app

REPO = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Run names as the stages give them: the stage, a grid cell (train), evaluate-<cell>.
RUN_NAMES = ("prepare", "tokenize", "search-20", "evaluate-search-20", "report")
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--virtual-time-budget=30000", "--window-size=1400,900")
# What MLflow 3.17's sidebar shows in each view ("GenAI" / "Model training" switch).
MODEL_TRAINING_ONLY = ("Model registry",)
GENAI_ONLY = ("Evaluations", "Observability", "Judges")


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
    out = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          url], capture_output=True, text=True, timeout=180, check=True).stdout
    title = re.search(r"<title>(.*?)</title>", out, re.S)
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", out, flags=re.S)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
    return (title.group(1).strip() if title else ""), text


def assert_model_training_view(text: str) -> None:
    """The page's sidebar is MLflow's model-training one, not its GenAI one."""
    assert all(word in text for word in MODEL_TRAINING_ONLY), text[:2000]
    assert not [word for word in GENAI_ONLY if word in text], text[:2000]


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


class Served(NamedTuple):
    """The UI the tests look at: its base address, the runs address it printed, the
    experiment's id, the id of the training run ``search-20``, the command that serves it
    (``make ui``, or the command its recipe runs where there is no make) and its log."""
    base: str
    printed: str
    experiment_id: str
    run_id: str
    process: subprocess.Popen
    log: Path
    by_make: bool


def training_run(name: str = "search-20") -> tuple[str, str]:
    """(experiment id, run id) of the run called ``name`` in the project's experiment."""
    experiment = mlflow.get_experiment_by_name(tracking.experiment_name())
    runs = mlflow.search_runs([experiment.experiment_id], f"attributes.run_name = '{name}'",
                              output_format="list")
    return experiment.experiment_id, runs[0].info.run_id


@pytest.fixture(scope="module")
def ui(tmp_path_factory) -> Iterator[Served]:
    """``make ui`` on a free port of 127.0.0.1 over a store of its own holding a few stage runs;
    one server for the module's tests (it takes about 25 s to start), stopped after them (the
    last test stops it as a user would)."""
    folder = tmp_path_factory.mktemp("ui")
    make = shutil.which("make")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        log_stage_runs()
        experiment_id, run_id = training_run()
        port = free_port()
        base, log = f"http://127.0.0.1:{port}", folder / "ui.log"
        # -o: never reinstall the venv here; PY: the interpreter running the tests.
        command = ([make, "-s", "-C", str(REPO), "-o", ".venv/.installed", "ui", f"PORT={port}",
                    f"PY={sys.executable}"] if make else ui_command(port))
        server = start(command, log, folder)
        try:
            yield Served(base, wait_for_runs_address(log, base, server), experiment_id, run_id,
                         server, log, make is not None)
        finally:
            stop(server)


@pytest.fixture
def chromium() -> str:
    """A headless-capable Chromium binary; skips the test when there is none."""
    browser = find_chromium()
    if browser is None:
        pytest.skip(f"no Chromium binary ({', '.join(BROWSERS)} or $CHROMIUM) for the "
                    "headless browser check; install one, e.g. apt-get install chromium")
    return browser


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """A handler that turns every redirect into an error, so a test sees the redirect itself."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        """Follow no redirect."""
        return None


def fetch(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of ``GET url``, redirects not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    with opener.open(url, timeout=10) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read().decode()


def test_the_ui_root_is_mlflows_page_that_picks_model_training_and_the_landing(ui):
    landing = f"/#/experiments/{ui.experiment_id}/runs?workflowType=machine_learning"
    assert ui.printed == ui.base + landing
    for address in ("/", "/?runs"):                   # the bare address and older bookmarks
        status, kind, page = fetch(ui.base + address)    # no redirect: the fragment survives
        assert (status, kind.split(";")[0]) == (200, "text/html"), address
        assert re.search(r'<script defer="defer" src="static-files/static/js/main\.', page)
        script = page[:page.index("static-files/static/js/main.")]   # runs before MLflow's app
        for part in (ui_app.WORKFLOW_KEY, json.dumps(json.dumps("machine_learning")),
                     "location.hash", json.dumps(landing)):
            assert part in script, (part, script)
    with urllib.request.urlopen(ui.base + "/health", timeout=10) as health:   # MLflow's own app
        assert health.status == 200


def serve_once(app: ui_app.LandingPage, method: str, path: str, host: bytes | None = None
               ) -> tuple[int, bytes]:
    """(status, body) of one request to the ASGI ``app`` (``host``: its Host header)."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "query_string": b"",
             "headers": [(b"host", host)] if host else []}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_the_landing_page_answers_the_root_only_and_fits_any_index():
    async def mlflow(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"mlflow"})

    page = ui_app.landing_page("<html><head><title>MLflow</title></head></html>", "/#/x")
    assert page.startswith(b"<html><head><script>") and b"<title>" in page
    app = ui_app.LandingPage(mlflow, page)
    assert serve_once(app, "GET", "/") == (200, page)
    assert serve_once(app, "HEAD", "/") == (200, b"")
    assert serve_once(app, "GET", "/health") == (404, b"mlflow")
    assert serve_once(ui_app.LandingPage(mlflow, None), "GET", "/") == (404, b"mlflow")
    for local in (b"127.0.0.1:5000", b"localhost", b"[::1]:5001"):
        assert serve_once(app, "GET", "/", local) == (200, page)
    # was: the page (with the experiment's id) under any host name; now MLflow's host check
    assert serve_once(app, "GET", "/", b"evil.example:5000") == (404, b"mlflow")
    headless = ui_app.landing_page("<p>no head</p>", "")
    assert headless.startswith(b"<script>") and b"location" not in headless   # no landing


def test_ui_opens_on_the_runs_in_a_headless_browser(ui, chromium, tmp_path):
    title, text = rendered_text(chromium, ui.base + "/", tmp_path / "profile")   # bare address
    assert title.startswith("Runs"), (title, text[:2000])
    assert f"{len(RUN_NAMES)} matching runs" in text, text[:2000]
    for name in RUN_NAMES:
        assert re.search(rf"(^| ){re.escape(name)} ", text), (name, text[:2000])
    # Not the GenAI overview a new experiment opens on in MLflow 3: "Traces 0, no data".
    assert not title.startswith("Overview") and "No data available" not in text
    assert_model_training_view(text)


def test_a_deep_link_to_a_run_opens_that_run_in_the_model_training_view(ui, chromium, tmp_path):
    # As a run's address is copied from the browser: no workflowType in it, so the view comes
    # from what the browser keeps (MLflow's default: GenAI), as on every run a user clicks.
    link = f"{ui.base}/#/experiments/{ui.experiment_id}/runs/{ui.run_id}"
    title, text = rendered_text(chromium, link, tmp_path / "profile")
    assert title.startswith("Run ") and ui.run_id in title, (title, text[:2000])
    assert "matching runs" not in text, text[:2000]                  # not the runs table
    assert "search-20" in text and "train/loss 4.3" in text, text[:2000]   # its name, metrics
    assert_model_training_view(text)


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


def test_kill_by_the_printed_pid_stops_make_ui_and_every_process_it_started(ui):
    """The module's ``make ui``, after the tests that look at it: SIGTERM to the pid it printed
    stops the server and every process ``make ui`` started."""
    if not ui.by_make:
        pytest.skip("no make on PATH")
    port = int(ui.base.rsplit(":", 1)[1])
    printed = int(re.search(r"^Stop it with Ctrl-C or: kill (\d+) ", ui.log.read_text(),
                            re.M).group(1))
    assert psutil.Process(printed).ppid() == ui.process.pid   # the recipe's shell exec'd the UI
    tree = psutil.Process(ui.process.pid).children(recursive=True)
    try:
        os.kill(printed, signal.SIGTERM)                # by its printed pid, not its group
        deadline = time.time() + 15
        while time.time() < deadline and (serves(port) or alive(tree)):
            time.sleep(0.2)
        assert not serves(port), f"still serving on {port}:\n{ui.log.read_text()[-3000:]}"
        assert not alive(tree), [p.cmdline() for p in alive(tree)]
        assert ui.process.wait(timeout=5) is not None
    finally:
        for process in alive(tree):
            process.kill()


def group_members(pgid: int) -> list[psutil.Process]:
    """The running processes of process group ``pgid``."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return alive(members)


def wait_until_gone(processes: list[psutil.Process], pgid: int, seconds: float) -> list[str]:
    """Wait up to ``seconds`` for ``processes`` and group ``pgid`` to end; the command lines of
    those still running then."""
    deadline = time.time() + seconds
    while time.time() < deadline and (alive(processes) or group_members(pgid)):
        time.sleep(0.2)
    left = {p.pid: p for p in alive(processes) + group_members(pgid)}
    return [" ".join(p.cmdline()[-4:]) for p in left.values()]


SIGKILLED_GROUP = """
from rnnsearch.procgroup import run_group
run_group(["sh", "-c", "sleep 300 & sleep 300 & wait"], grace=2.0)
"""


def test_sigkill_of_run_groups_caller_stops_the_whole_group():
    """Was: the parent-death signal reached the group's leader only, so a SIGKILL of the
    process running :func:`run_group` left the leader's children running (here two sleeps,
    in ``make ui`` MLflow's job runner and its huey consumers)."""
    caller = subprocess.Popen([sys.executable, "-c", SIGKILLED_GROUP],
                              env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                              start_new_session=True)
    tree: list[psutil.Process] = []
    try:
        deadline = time.time() + 30
        while time.time() < deadline and len([p for p in tree if p.name() == "sleep"]) < 2:
            time.sleep(0.1)
            tree = psutil.Process(caller.pid).children(recursive=True)
        leader = next(p for p in tree if p.name() == "sh")
        caller.kill()
        caller.wait()
        left = wait_until_gone(tree, leader.pid, 10)
        assert left == [], left
    finally:
        for process in alive(tree):
            process.kill()


def test_sigkill_of_the_ui_stops_every_process_it_started(tmp_path, monkeypatch):
    """Was: ``kill -9`` of ``make ui`` (``python -m rnnsearch.tracking ui``) left MLflow's job
    runner's seven huey consumers running, for as long as each took to import MLflow and
    notice it was orphaned (about 15 s on 2 busy cores). Job execution is switched on here, as
    it was then (the UI now starts MLflow without it), so that there are consumers to stop."""
    monkeypatch.setenv(tracking.JOB_EXECUTION_ENV, "true")
    port = free_port()
    base, log = f"http://127.0.0.1:{port}", tmp_path / "ui.log"
    ui = start(ui_command(port), log, tmp_path)
    tree: list[psutil.Process] = []
    try:
        wait_for_runs_address(log, base, ui)
        deadline = time.time() + 120
        while time.time() < deadline and sum("huey_consumer" in " ".join(p.cmdline())
                                              for p in alive(tree)) < 7:
            time.sleep(0.2)
            tree = psutil.Process(ui.pid).children(recursive=True)
        server = next(p for p in tree if "mlflow" in p.cmdline() and "server" in p.cmdline())
        ui.kill()                                       # kill -9: no code of the UI runs
        ui.wait()
        left = wait_until_gone(tree, server.pid, 10)
        assert left == [], f"{left}\n{log.read_text()[-3000:]}"
        assert not serves(port)
    finally:
        for process in alive(tree):
            process.kill()
        stop(ui)


def test_the_ui_starts_mlflow_without_its_job_runner(monkeypatch):
    """The huey consumers of MLflow's job runner (GenAI jobs, seven processes) are not started
    unless the environment asks for them."""
    import rnnsearch.procgroup

    envs: list[dict[str, str]] = []
    monkeypatch.setattr(rnnsearch.procgroup, "run_group",
                        lambda cmd, env: envs.append(env))      # "stopped by a signal"
    argv = ["ui", "--port", str(free_port())]
    assert tracking.main(argv) == 0
    monkeypatch.setenv(tracking.JOB_EXECUTION_ENV, "true")
    assert tracking.main(argv) == 0
    assert [env[tracking.JOB_EXECUTION_ENV] for env in envs] == ["false", "true"]
