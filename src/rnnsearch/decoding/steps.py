"""One masked decoder step, shared by greedy and beam search so that ``beam_size = 1`` and greedy
see the same distributions: ``<pad>`` and ``<s>`` are never produced, and at a sentence's length
limit only ``</s>`` is allowed."""
from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

import torch

from rnnsearch.data.vocab import BOS_ID, EOS_ID, PAD_ID
from rnnsearch.models.state import reorder

T = TypeVar("T")


class StepOutput(NamedTuple):
    """Log-probabilities of the next word, the new decoder state, the attention (or None)."""

    log_probs: torch.Tensor            # rows x vocab
    state: Any                         # the model's DecoderState
    attention: torch.Tensor | None     # rows x src_len


def next_log_probs(model: Any, prev: torch.Tensor, state: Any, memory: Any,
                   at_limit: torch.Tensor) -> StepOutput:
    """One decoder step for ``rows`` hypotheses, search masks applied. ``prev``: rows (word ids);
    ``at_limit``: rows (bool), True where this step is the last allowed (only ``</s>``)."""
    logits, state, attn = model.step(prev, state, memory)          # rows x vocab
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs[:, PAD_ID] = -torch.inf
    log_probs[:, BOS_ID] = -torch.inf
    if bool(at_limit.any()):                  # rare: most steps have no row at its limit
        rows = at_limit.nonzero().squeeze(1)
        eos = log_probs[rows, EOS_ID]
        log_probs[rows] = -torch.inf
        log_probs[rows, EOS_ID] = eos
    return StepOutput(log_probs, state, None if attn is None else attn.float())



def select_rows(x: T, index: torch.Tensor) -> T:
    """Rows ``index`` of a model's memory or state: its type's ``reordered(index)`` if any (the
    Transformer's gathers only decoded positions), else :func:`rnnsearch.models.state.reorder`."""
    own = getattr(x, "reordered", None)
    return own(index) if own is not None else reorder(x, index)
