"""Lightning checkpoints read safely (``weights_only=True``: a crafted pickle cannot run code; a
damaged file is a ``DataError`` naming it) and written whole or not at all."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from pytorch_lightning.plugins.io import TorchCheckpointIO

from rnnsearch.data.savefile import save_atomically
from rnnsearch.errors import DataError
from rnnsearch.models.files import read_torch_dict

# Python's last-resort handler prints a WARNING as one bare stderr line; the stage goes on
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


class SameDiskCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, writing beside the target and renaming into place: a full
    disk or a kill leaves the previous ``last.ckpt`` whole (the stock one truncates it); errors
    name the checkpoint."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError("storage_options are not supported for local checkpoints")
        save_atomically(Path(path), lambda file: torch.save(checkpoint, file))
