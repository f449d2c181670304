"""How every command ends: all run through :func:`run_command` (or :func:`entry_point`), so an
expected failure (:data:`~rnnsearch.errors.EXPECTED`) is one line ``<prog>: error: <message>``
on stderr and exit 2; Ctrl-C is one line ``<prog>: <what it left>`` and exit 130; anything else
is a bug and keeps its traceback (exit 1). Imports only :mod:`rnnsearch.errors` and
:mod:`rnnsearch.data.savefile`."""
from __future__ import annotations

import errno
import functools
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from rnnsearch.data.savefile import free_bytes, mount_point
from rnnsearch.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXPECTED


Main = Callable[[Optional[Sequence[str]]], int]


def run_command(prog: str, body: Callable[[], object], interrupted: str = "interrupted") -> int:
    """Run ``body``; return its exit status (0 unless it returns an int), or print one line and
    return 2 after an expected failure, 130 after Ctrl-C (``<prog>: <interrupted>``)."""
    try:
        status = body()
    except EXPECTED as err:
        print(f"{prog}: error: {describe(err)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status if isinstance(status, int) else 0


def entry_point(prog: str, interrupted: str = "interrupted") -> Callable[[Main], Main]:
    """Decorate a tool's ``main(argv) -> int`` so that it runs through :func:`run_command`
    (argparse's own usage errors still exit 2 through ``SystemExit``)."""
    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def guarded(argv: Sequence[str] | None = None) -> int:
            return run_command(prog, lambda: main(argv), interrupted)
        return guarded
    return decorate


def describe(err: BaseException) -> str:
    """One line for an expected failure; a full disk names the file, its file system and the
    space left there, and says what to do."""
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        where = ""
        if err.filename:
            disk = Path(err.filename).parent
            where = (f" writing {err.filename} (file system {mount_point(disk)}, "
                     f"{free_bytes(disk) / 1e6:.1f} MB free)")
        return (f"disk full{where}: free some space and rerun (the previous outputs are "
                f"unchanged; a training run resumes from its last checkpoint)")
    if isinstance(err, OSError) and err.filename and str(err.filename) not in str(err):
        return f"{err.filename}: {err.strerror or err}"
    return " ".join(str(err).split()) or type(err).__name__
