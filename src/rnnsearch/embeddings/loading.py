"""Load the embed stage's vocabulary-aligned vectors into a model.

``<side>.vocab.npy`` (float32 ``[V, d]``, zero rows where missing) and ``<side>.mask.npy`` (bool
``[V]``), see ``docs/contracts.md``. Any shape but the model's ``(V, d)`` is refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from rnnsearch.errors import DataError
from rnnsearch.data.vocab import SPECIALS


def coverage(mask: np.ndarray) -> float:
    """Fraction of the ordinary vocabulary words (specials excluded) that have a vector."""
    words = np.asarray(mask, dtype=bool)[len(SPECIALS):]  # V - 4
    return float(words.mean()) if words.size else 0.0


RERUN_EMBED = "rerun the embed stage (dvc repro embed)"


def read_npy(path: str | Path) -> np.ndarray:
    """One ``.npy`` array; missing, truncated or not ``.npy``: a :class:`DataError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found; {RERUN_EMBED}")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise DataError(f"{path}: not a readable .npy array ({reason}); {RERUN_EMBED}") from err


def check_finite(path: str | Path, vectors: np.ndarray) -> None:
    """Refuse vectors with NaN or infinite values: they would poison every gradient step."""
    if not np.issubdtype(vectors.dtype, np.floating):
        raise DataError(f"{path}: word vectors have dtype {vectors.dtype}, expected floats; "
                        f"{RERUN_EMBED}")
    bad = ~np.isfinite(vectors)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=-1)) if vectors.ndim == 2 else np.flatnonzero(bad)
        raise DataError(f"{path}: {int(bad.sum())} NaN or infinite values in {rows.size} "
                        f"row(s), the first in row {int(rows[0])}; {RERUN_EMBED}")


def read_vector_rows(npy_path: str | Path, mask_path: str | Path, vocab_size: int,
                     dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``[V, d]`` vectors and ``[V]`` mask, checked against the expected ``(vocab_size, dim)``
    and for NaN/inf; every error is a :class:`DataError` naming the file."""
    vectors = read_npy(npy_path)
    mask = read_npy(mask_path)
    expected = (vocab_size, dim)
    if vectors.ndim != 2 or tuple(vectors.shape) != expected:
        raise DataError(f"{npy_path}: word vectors have shape {tuple(vectors.shape)}, but the model "
                        f"expects {expected} (vocabulary size x embedding size); rerun the embed "
                        f"stage or make embed.vector_size and the vocabulary agree")
    check_finite(npy_path, vectors)
    if tuple(mask.shape) != (vocab_size,) or mask.dtype != np.bool_:
        raise DataError(f"{mask_path}: mask has shape {tuple(mask.shape)} and dtype {mask.dtype}, "
                        f"expected a bool mask of shape {(vocab_size,)}")
    return vectors.astype(np.float32, copy=False), mask


def load_vocab_vectors(npy_path: str | Path, mask_path: str | Path, vocab_size: int,
                       dim: int) -> tuple[torch.Tensor, float]:
    """The vectors as a ``[V, d]`` float tensor (zero rows where missing) and the coverage."""
    vectors, mask = read_vector_rows(npy_path, mask_path, vocab_size, dim)
    return torch.from_numpy(vectors.copy()), coverage(mask)


def init_embedding(embedding: nn.Embedding, npy_path: str | Path, mask_path: str | Path) -> float:
    """Overwrite the rows of ``embedding`` that have a vector; the others keep their init.
    Returns the coverage (fraction of ordinary words found)."""
    vocab_size, dim = embedding.weight.shape
    vectors, mask = read_vector_rows(npy_path, mask_path, vocab_size, dim)
    with torch.no_grad():
        rows = torch.from_numpy(np.flatnonzero(mask))
        embedding.weight[rows] = torch.from_numpy(vectors[mask]).to(embedding.weight.dtype)
    return coverage(mask)
