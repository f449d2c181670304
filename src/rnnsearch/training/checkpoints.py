"""Reading checkpoints safely: weights only, and a clear error naming a damaged file."""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from rnnsearch.data.textio import DataError


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)``: tensors, containers, numbers and strings only.

    A pickle that would build any other object (and so could run code) is refused, as is a
    truncated or empty file; either way a :class:`DataError` names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: checkpoint not found")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise DataError(f"{path}: refused: it holds objects other than tensors and plain data "
                        f"(weights_only=True): {str(err).splitlines()[0]}") from err
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        raise DataError(f"{path}: unreadable checkpoint (truncated or not a torch file): "
                        f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from err
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a checkpoint (a {type(data).__name__}, not a dict)")
    return data


def check_checkpoint(path: str | Path) -> None:
    """Raise :class:`DataError` unless ``path`` loads as a weights-only checkpoint."""
    load_checkpoint(path)
