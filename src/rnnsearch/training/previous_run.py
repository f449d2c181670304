"""The previous run's resume state, set aside (not deleted) while a new run gets going.

Deleting it at a fresh start would lose its progress whenever the new run then fails. So it
moves into ``<out>/.previous-run/`` (renames on the same disk): it comes back when the new run
fails before its first checkpoint, a later run with its fingerprint resumes from it (the two
swap places), and it is dropped when the new run finishes."""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rnnsearch.environment import is_main_process

ASIDE = ".previous-run"


@dataclass(frozen=True)
class RunState:
    """The files of ``folder`` that make a run's resume state (``names``); ``checkpoint``, one of
    them, is the file that holds the run's progress. Every method moves files on the main process
    only (the other processes of a multi-process run read them)."""

    folder: Path
    names: tuple[str, ...]
    checkpoint: str = "last.ckpt"

    @property
    def aside(self) -> "RunState":
        """The state set aside in ``<folder>/.previous-run/``."""
        return RunState(self.folder / ASIDE, self.names, self.checkpoint)

    def has_checkpoint(self) -> bool:
        """True when this state holds a run's progress."""
        return (self.folder / self.checkpoint).is_file()

    def clear(self) -> None:
        """Delete this state's files."""
        if is_main_process():
            for name in self.names:
                (self.folder / name).unlink(missing_ok=True)

    def move_to(self, other: "RunState") -> None:
        """Replace ``other``'s files by this state's (the checkpoint moves first, so a state
        is never a new fingerprint beside an old checkpoint)."""
        if not is_main_process():
            return
        other.clear()
        other.folder.mkdir(parents=True, exist_ok=True)
        order = sorted(self.names, key=lambda name: name != self.checkpoint)
        for name in order:
            if (self.folder / name).is_file():
                (self.folder / name).replace(other.folder / name)

    def set_aside(self) -> None:
        """Before a fresh start: this state replaces the one set aside, unless only the one set
        aside holds progress (this one never reached its first checkpoint: it is deleted)."""
        if self.has_checkpoint() or not self.aside.has_checkpoint():
            self.move_to(self.aside)
        else:
            self.clear()

    def swap_with_aside(self) -> None:
        """Resume the run set aside: it comes back into ``folder``, this one goes aside."""
        if not is_main_process():
            return
        swap = RunState(self.folder / f"{ASIDE}.swap", self.names, self.checkpoint)
        swap.discard()                  # what a swap killed half-way left
        self.aside.move_to(swap)
        self.set_aside()
        swap.move_to(self)
        swap.discard()

    def take_back(self) -> None:
        """Put the state set aside back into ``folder``, as it was."""
        if self.aside.folder.is_dir():
            self.aside.move_to(self)
        self.drop_aside()

    def drop_aside(self) -> None:
        """Delete the state set aside (the new run has finished)."""
        self.aside.discard()

    def discard(self) -> None:
        """Delete this state's folder (only used for ``.previous-run`` folders)."""
        if is_main_process():
            shutil.rmtree(self.folder, ignore_errors=True)

    @contextlib.contextmanager
    def restored_on_failure(self) -> Iterator[None]:
        """Run a block; when it fails before a checkpoint of its own exists, the state set
        aside comes back (the failure is raised on)."""
        try:
            yield
        except BaseException:
            if not self.has_checkpoint():
                self.take_back()
            raise
