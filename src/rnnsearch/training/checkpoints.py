"""Reading Lightning checkpoints safely: weights only, and a clear error naming a damaged file.

``torch.load(..., weights_only=True)`` (through :func:`rnnsearch.models.files.read_torch_dict`)
accepts tensors, containers, numbers and strings only, so a crafted pickle cannot run code; a
truncated or empty file becomes a :class:`~rnnsearch.data.textio.DataError` naming it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnsearch.models.files import read_torch_dict


def load_checkpoint(path: str | Path, hint: str = "delete it to start this run afresh"
                    ) -> dict[str, Any]:
    """A Lightning checkpoint (``state_dict`` and loop states) read with ``weights_only=True``."""
    return read_torch_dict(path, ("state_dict",), "a training checkpoint", hint)


def check_checkpoint(path: str | Path) -> None:
    """Raise :class:`DataError` unless ``path`` loads as a weights-only checkpoint."""
    load_checkpoint(path)
