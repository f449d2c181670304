"""The stage runner: what every DVC stage does the same way.

``pipeline/<stage>.py`` calls ``main("<stage>")``, which parses ``--params`` and the stage's paths,
stops the stage when ``dvc repro`` dies (no orphan keeps writing the model folder), locks each
output against a second writer, recovers what a killed run left, runs the body with a
:class:`StageContext` and turns expected failures into one line and exit status 2
(:mod:`rnnsearch.command`). Outputs are written atomically; when the stage fails under ``dvc
repro`` (which deleted them first) the previous ones come back from DVC's cache."""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence, TypeVar

from rnnsearch.allocator import keep_freed_memory
from rnnsearch.command import run_command
from rnnsearch.config.base import load_section
from rnnsearch.data.textio import atomic_dir, write_json
from rnnsearch.environment import describe_environment, is_main_process
from rnnsearch.errors import StageError
from rnnsearch.procgroup import proc_stat, set_parent_death_signal
from rnnsearch.dvc_outputs import keep_after_success, restore_after_failure

T = TypeVar("T")
RESUME_ROOT = ".cache/resume"


@dataclass(frozen=True)
class Stage:
    """One DVC stage: its name (as in dvc.yaml), its arguments, outputs and body."""

    name: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    outputs: Callable[[argparse.Namespace], Sequence[Path]]
    body: Callable[[argparse.Namespace, "StageContext"], None]
    uncached_outputs: bool = True   # metrics and the like, kept for a restore after a failure


class StageContext:
    """What a stage body gets: its params, atomic writers and MLflow, all done one way."""

    def __init__(self, stage: str, params: str) -> None:
        self.stage, self.params = stage, params

    def section(self, cls: type[T], key: str | None = None) -> T:
        """The params section ``key`` (default: the stage's name) as a validated dataclass;
        this machine's checks (``check_runtime``: a GPU, Lightning's flags) for its own only."""
        return load_section(cls, key or self.stage, self.params, runtime=key in (None, self.stage))

    @staticmethod
    def project_path(path: str | None) -> str | None:
        """A relative params path resolved against the repository, also from a temporary
        experiment's copy under ``.dvc/tmp/exps/`` (in the repository: returned as given)."""
        from rnnsearch.tracking import repo_root

        if path is None or Path(path).expanduser().is_absolute() or "://" in path:
            return path
        root = repo_root()
        return path if root == Path.cwd().resolve() else str(root / path)

    def resume_root(self, output: Path) -> Path:
        """Resume state of the runs writing ``output``: ``.cache/resume/<stage>/<output's name>``
        in the repository holding ``output`` (untracked; an experiment's copy maps to its repo)."""
        from rnnsearch.config.repository import repo_root

        return repo_root(Path(output).absolute().parent) / RESUME_ROOT / self.stage / output.name

    @staticmethod
    def output_dir(path: Path) -> contextlib.AbstractContextManager[Path]:
        """A temporary directory that replaces ``path`` only when the block succeeds."""
        return atomic_dir(path)

    @staticmethod
    def write_json(path: Path, data: Any) -> None:
        """Write ``data`` as JSON through a temporary file and a rename."""
        write_json(path, data)

    @staticmethod
    def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
        """Write a metrics file with the machine and library versions that produced it."""
        write_json(path, {**metrics, "environment": describe_environment()})

    @contextlib.contextmanager
    def mlflow_run(self, params: Any = None, run_name: str | None = None,
                   tags: dict[str, str] | None = None) -> Iterator[Any]:
        """An MLflow run of this stage (safe when several stages start on a new store)."""
        from rnnsearch import tracking

        with tracking.start_run(self.stage, params, run_name, tags) as active:
            yield active


def main(name: str) -> None:
    """``pipeline/<name>.py``'s body: run the stage, freed memory kept for reuse."""
    keep_freed_memory()
    module = importlib.import_module(f"rnnsearch.stages.{name}")
    sys.exit(run(module.STAGE))


def run(stage: Stage, argv: list[str] | None = None) -> int:
    """Run ``stage`` as a command; returns the exit status (0, 2 for expected errors, 130 for
    Ctrl-C; a programming error propagates with its traceback)."""
    parser = argparse.ArgumentParser(prog=f"{stage.name}", description=stage.description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="the params file")
    stage.arguments(parser)
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        die_with_parent()
        quiet_known_noise()
        return run_command(stage.name, lambda: run_body(stage, args),
                           "interrupted; the previous outputs are in place")
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C, so the stage stops through its clean-up (previous outputs put back), not
    mid-way. (While training, Lightning handles SIGTERM itself and stops so at the step's end.)"""
    raise KeyboardInterrupt


def run_body(stage: Stage, args: argparse.Namespace) -> None:
    """Lock and recover the outputs, run the body; if it fails under ``dvc repro``, restore them."""
    with contextlib.ExitStack() as stack:
        for path in stage.outputs(args) if is_main_process() else ():
            stack.enter_context(output_lock(Path(path), stage.name))
            recover_leftovers(Path(path))
        try:
            stage.body(args, StageContext(stage.name, args.params))
        except BaseException:
            if is_main_process():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)   # a second one (the watcher's,
                restore_after_failure(stage.name)               # dvc's) must not cut it short
            raise
        if is_main_process() and stage.uncached_outputs:
            keep_after_success(stage.name)


class _DropMessage(logging.Filter):
    """Drop log records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


NOISE = {  # logger -> message prefix a stage's log does not need
    # Lightning says so at every checkpoint it saves (the full state, its default, as intended)
    "pytorch_lightning.trainer.connectors.checkpoint_connector": "`weights_only` was not set",
}


def quiet_known_noise() -> None:
    """Filter out library log lines that repeat on every step or checkpoint and say nothing."""
    for name, prefix in NOISE.items():
        logging.getLogger(name).addFilter(_DropMessage(prefix))


def die_with_parent() -> None:
    """Under ``dvc repro`` on Linux, SIGTERM this stage when the ``dvc`` ancestor dies
    (``PR_SET_PDEATHSIG``, and a watcher thread for a shell in between); else do nothing."""
    if "DVC_STAGE" not in os.environ or not sys.platform.startswith("linux"):
        return
    dvc = dvc_ancestor()
    if dvc is None:
        return
    set_parent_death_signal(signal.SIGTERM)
    if not _alive(*dvc):
        os.kill(os.getpid(), signal.SIGTERM)     # dvc died between finding it and watching it
        return
    threading.Thread(target=_watch, args=dvc, name="watch-dvc", daemon=True).start()


def dvc_ancestor() -> tuple[int, str] | None:
    """(pid, start time) of the nearest ancestor running ``dvc``, or None."""
    pid = os.getppid()
    with contextlib.suppress(OSError, IndexError):
        while pid > 1:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(Path(a.decode(errors="replace")).name == "dvc" for a in argv[:2]) or \
                    argv[1:3] == [b"-m", b"dvc"]:
                return pid, proc_stat(pid)[19]
            pid = int(proc_stat(pid)[1])
    return None


def _alive(pid: int, started: str) -> bool:
    """True while ``pid`` is the same process (not a reused pid) and not a zombie."""
    try:
        stat = proc_stat(pid)
    except OSError:
        return False
    return stat[19] == started and stat[0] != "Z"


def _watch(pid: int, started: str, every: float = 1.0) -> None:
    while _alive(pid, started):
        time.sleep(every)
    os.kill(os.getpid(), signal.SIGTERM)


def lock_path(output: Path) -> Path:
    """``<dir>/.<name>.lock``: beside the output, outside any folder DVC tracks."""
    return output.parent / f".{output.name}.lock"


@contextlib.contextmanager
def output_lock(output: Path, stage: str) -> Iterator[IO[str]]:
    """Hold an exclusive lock on ``output`` (refused while another process holds it); the lock
    file and folders made for it are removed on release, the unlink race handled."""
    path = lock_path(output)
    created = _make_parents(path.parent)
    try:
        while True:
            handle = open(path, "a+", encoding="utf-8")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                handle.close()
                raise StageError(f"{output}: another process (pid {holder}) is writing it; "
                                 f"wait for it to finish or stop it, then rerun {stage}") from None
            if _same_file(handle, path):
                break
            handle.close()
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield handle
        finally:
            path.unlink(missing_ok=True)
            handle.close()
    finally:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()          # only when empty: the stage wrote nothing there


def _same_file(handle: IO[str], path: Path) -> bool:
    """True when ``path`` still names the file ``handle`` has open."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def _make_parents(folder: Path) -> list[Path]:
    """``mkdir -p folder``; returns the folders it made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def recover_leftovers(output: Path) -> None:
    """Undo what a killed run left beside ``output``: ``.<name>.old`` (a half-done swap) goes
    back when the new output never arrived, else it and ``.<name>.tmp-*`` are removed."""
    parent = output.parent
    if not parent.is_dir():
        return
    backup = parent / f".{output.name}.old"
    if backup.exists() and not output.exists():
        backup.rename(output)
    elif backup.exists():
        _remove(backup)
    for leftover in parent.glob(f".{output.name}.tmp-*"):
        _remove(leftover)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
