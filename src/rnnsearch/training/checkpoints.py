"""Reading Lightning checkpoints safely: weights only, and a clear error naming a damaged file.

``torch.load(..., weights_only=True)`` (through :func:`rnnsearch.models.files.read_torch_dict`)
accepts tensors, containers, numbers and strings only, so a crafted pickle cannot run code; a
truncated or empty file becomes a :class:`~rnnsearch.data.textio.DataError` naming it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rnnsearch.data.textio import DataError
from rnnsearch.models.files import read_torch_dict

# Python's last-resort handler prints a WARNING as one bare line on stderr; a stage's log shows
# it next to Lightning's own lines, and the stage goes on.
log = logging.getLogger("rnnsearch")


def load_checkpoint(path: str | Path, hint: str = "delete it to start this run afresh"
                    ) -> dict[str, Any]:
    """A Lightning checkpoint (``state_dict`` and loop states) read with ``weights_only=True``."""
    return read_torch_dict(path, ("state_dict",), "a training checkpoint", hint)


def resume_point(path: str | Path, instead: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` to resume from, or None after one warning line naming the
    file when it is damaged or refused; ``instead`` says what happens then."""
    try:
        return load_checkpoint(path, "not resumed from")
    except DataError as err:
        log.warning("warning: %s: %s", err, instead)
        return None
