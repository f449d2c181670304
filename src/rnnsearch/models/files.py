"""Reading the PyTorch files stages hand each other (``model.pt``, ``decoder_init.pt``).

:func:`read_torch_dict` turns every way such a file can be unreadable (missing, a directory, empty,
truncated, not a PyTorch file, a PyTorch file of something else) into one
:class:`~rnnsearch.data.textio.DataError` starting with the path and naming the stage to rerun."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from rnnsearch.errors import DataError


def _reason(err: BaseException) -> str:
    """The first sentence of ``err``'s message, on one line and short."""
    text = " ".join(str(err).split())
    first = text.split(". ")[0].rstrip(".")
    return (first[:160] + "...") if len(first) > 160 else first or type(err).__name__


def read_torch_dict(path: str | Path, keys: Sequence[str], what: str, hint: str) -> dict[str, Any]:
    """``torch.load`` (weights only, CPU) of a dict with ``keys``, else :class:`DataError` naming
    ``path``, ``what`` ("a model file") and ``hint`` ("rerun the train stage")."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found; {hint}")
    if not path.is_file():
        raise DataError(f"{path}: is a directory, not {what}; {hint}")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: file is empty, not {what}; {hint}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch.load raises RuntimeError, EOFError, UnpicklingError, ...
        raise DataError(f"{path}: cannot be read as {what} (truncated or not a PyTorch file: "
                        f"{_reason(err)}); {hint}") from err
    if not isinstance(data, dict):
        raise DataError(f"{path}: holds a {type(data).__name__}, not {what}; {hint}")
    for key in keys:
        if key not in data:
            raise DataError(f"{path}: not {what} (no '{key}'); {hint}")
    return data


def check_state_dict(path: str | Path, state: Any, what: str, hint: str) -> dict[str, torch.Tensor]:
    """``state`` must map parameter names to tensors; errors name ``path``."""
    ok = isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())
    if not ok:
        raise DataError(f"{path}: its 'state_dict' is not a mapping of names to tensors, so it is "
                        f"not {what}; {hint}")
    return state
