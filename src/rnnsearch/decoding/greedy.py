"""Greedy decoding: take the most probable word at each step and feed it back.

Fast (one decoder step per output word for the whole batch) but it cannot take back an early
choice; beam search (:mod:`rnnsearch.decoding.beam`) can. Sentences that have emitted ``</s>``
keep riding along in the batch (cheaper than reshuffling at these batch sizes); their rows are
ignored.
"""
from __future__ import annotations

from typing import Any

import torch

from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.hypothesis import Hypothesis, Translation
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise
from rnnsearch.decoding.steps import next_log_probs


@torch.inference_mode()
def greedy(model: Any, src: torch.Tensor, src_len: torch.Tensor,
           options: SearchOptions = SearchOptions()) -> list[Translation]:
    """Greedy translations of a batch: ``src`` batch x src_len ids, ``src_len`` batch.

    Only the length limit and the length penalty of ``options`` apply.
    """
    batch = src.size(0)
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    limits = max_output_lengths(src_len, options)                 # batch
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    scores = torch.zeros(batch, dtype=torch.float64, device=src.device)
    words, attention = [], []                                     # per step: batch, batch x S
    for step in range(int(limits.max())):
        out = next_log_probs(model, prev, state, memory, at_limit=limits == step + 1)
        best, prev = out.log_probs.max(dim=-1)                    # batch, batch
        scores += torch.where(done, torch.zeros_like(best), best).double()
        words.append(prev)
        if out.attention is not None:
            attention.append(out.attention)
        state = out.state
        done = done | (prev == EOS_ID)
        if bool(done.all()):
            break
    tokens = torch.stack(words, dim=1)                            # batch x steps
    attn = torch.stack(attention, dim=1) if attention else None   # batch x steps x S
    return [_translation(tokens[i], float(scores[i]), attn, i, int(src_len[i]), options)
            for i in range(batch)]


def _translation(tokens: torch.Tensor, score: float, attn: torch.Tensor | None, row: int,
                 src_len: int, options: SearchOptions) -> Translation:
    """Cut sentence ``row``'s output after its first ``</s>``."""
    ids = tokens.tolist()
    length = ids.index(EOS_ID) + 1
    matrix = None if attn is None else attn[row, :length, :src_len].cpu().numpy()
    hypothesis = Hypothesis(tuple(ids[:length]), score, normalise(score, length, options), matrix)
    return Translation((hypothesis,))
