"""What flows between encoder, decoder steps and search: ``Memory``, ``DecoderState``, ``reorder``.

Every decoder's ``prepare_memory``, ``init_state`` and ``step`` pass NamedTuples of batch-first
tensors (or ``None``). Searches read no field, only expand and :func:`reorder` them, so a new
architecture brings its own types (as :mod:`rnnsearch.models.transformer`) and no search changes."""
from __future__ import annotations

from typing import NamedTuple, TypeVar

from torch import Tensor


class Memory(NamedTuple):
    """The encoded source, computed once per batch by ``Seq2Seq.encode``."""

    values: Tensor          # batch x src_len x D: annotations h_j (D = 2H if bidirectional)
    keys: Tensor | None     # batch x src_len x K: source-only score part U h_j; None: no attention
    mask: Tensor            # batch x src_len, bool, True on real words
    lengths: Tensor         # batch, long: real source lengths
    summary: Tensor         # batch x F: what initialises the decoder (encdec: the context c)


class DecoderState(NamedTuple):
    """The decoder's recurrent state between steps (batch-first, unlike ``nn.GRU``'s h_n)."""

    hidden: Tensor          # batch x layers x H
    cell: Tensor | None     # batch x layers x H (LSTM only)
    feed: Tensor | None     # batch x H: Luong's attentional state h~_{t-1} (input feeding only)
    step: Tensor            # batch, long: index t of the next target word


T = TypeVar("T")


def reorder(x: T, index: Tensor) -> T:
    """Select rows ``index`` along dim 0 of a tensor or of every tensor field of a NamedTuple.
    ``index`` may repeat rows (expand a batch to batch*k) or permute them (beam reordering)."""
    if isinstance(x, Tensor):
        return x.index_select(0, index)  # type: ignore[return-value]
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(None if f is None else f.index_select(0, index) for f in x))  # type: ignore[return-value]
    raise TypeError(f"reorder: expected a tensor or a NamedTuple of tensors, got {type(x).__name__}")
