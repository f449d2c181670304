"""Writing a binary file (a model, a checkpoint) so that it is whole or not there at all.

:func:`save_atomically` writes in a hidden folder beside the target (same disk, unlike Lightning's
writer), then renames. A failure is one ``OSError`` naming the file and the space left (torch's
``PytorchStreamWriter failed writing file`` becomes ``ENOSPC`` on a full disk)."""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Callable

FULL_BELOW = 1 << 20   # bytes left on a file system whose write failed: it counts as full
TORCH_WRITE_FAILURES = ("PytorchStreamWriter", "unexpected pos", "file write failed")


def mount_point(path: Path) -> Path:
    """The mount point of the file system ``path`` (or its nearest existing parent) is on."""
    path = path.resolve()
    while not path.exists():
        path = path.parent
    while not os.path.ismount(path):
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes free to this process on the file system of ``path``."""
    return shutil.disk_usage(mount_point(path)).free


def write_failure(path: Path, err: BaseException, free: int) -> OSError:
    """The error to raise for a failed write of ``path`` (``free``: bytes left at the failure)."""
    code = getattr(err, "errno", None)
    if code is None or code == errno.EIO:
        code = errno.ENOSPC if free < FULL_BELOW else errno.EIO
    where = f"file system {mount_point(path)}: {free / 1e6:.1f} MB free"
    return OSError(code, f"{os.strerror(code)} ({where})", str(path))


def is_write_failure(err: BaseException) -> bool:
    """True for an ``OSError``, and for torch's ``RuntimeError`` of a failed archive write."""
    return isinstance(err, OSError) or (
        isinstance(err, RuntimeError) and any(s in str(err) for s in TORCH_WRITE_FAILURES))


def remove_abandoned_temporaries(path: Path) -> list[Path]:
    """Remove (and return) the temporary folders of earlier writes of ``path`` whose process is gone
    (killed mid-write); a running process's folder is left alone."""
    abandoned = []
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        pid = tmp.name.rpartition("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)
            abandoned.append(tmp)
    return abandoned


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # another user's process
        return True
    return True


def save_atomically(path: str | Path, save: Callable[[Path], None],
                    inner_name: str | None = None) -> None:
    """Call ``save(file)`` on ``.<name>.tmp-<pid>/<inner_name>`` beside ``path`` (first removing
    folders a ``kill -9`` left), then rename it into place. ``inner_name`` (default ``path``'s
    name): ``torch.save`` names its archive after the file, so a fixed name gives the same bytes
    wherever they go. A failure removes the folder, raising :func:`write_failure`'s ``OSError``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_temporaries(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.mkdir(exist_ok=True)
    file = tmp / (inner_name or path.name)
    try:
        save(file)
        os.replace(file, path)
    except BaseException as err:
        free = free_bytes(path.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        if is_write_failure(err):
            raise write_failure(path, err, free) from err
        raise
    tmp.rmdir()
