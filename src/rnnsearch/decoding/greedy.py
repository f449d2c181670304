"""Greedy decoding: take the most probable word at each step and feed it back.

Sentences leave the batch once they have emitted ``</s>``: the output layer is most of a step's
cost and a batch runs as long as its longest output, so finished rows would waste about half."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.hypothesis import Hypothesis, Translation
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise
from rnnsearch.decoding.steps import next_log_probs, select_rows


@torch.inference_mode()
def greedy(model: Any, src: torch.Tensor, src_len: torch.Tensor,
           options: SearchOptions = SearchOptions()) -> list[Translation]:
    """Greedy translations of a batch: ``src`` batch x src_len ids, ``src_len`` batch.
    Only the length limit and the length penalty of ``options`` apply."""
    batch = src.size(0)
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    limits = max_output_lengths(src_len, options)                 # batch
    tokens = torch.full((batch, int(limits.max())), EOS_ID, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, dtype=torch.float64, device=src.device)
    attention = None                                              # batch x steps x S
    rows = torch.arange(batch, device=src.device)                 # active: rows of the batch
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    for step in range(tokens.size(1)):
        out = next_log_probs(model, prev, state, memory, at_limit=limits[rows] == step + 1)
        best, prev = out.log_probs.max(dim=-1)                    # active, active
        scores[rows] += best.double()
        tokens[rows, step] = prev
        if out.attention is not None:
            if attention is None:
                attention = out.attention.new_zeros(batch, tokens.size(1), src.size(1))
            attention[rows, step] = out.attention
        live = (prev != EOS_ID).nonzero().squeeze(1)              # active rows still going
        if live.numel() == 0:
            break
        state = out.state
        if live.numel() < rows.numel():
            rows, prev = rows[live], prev[live]
            state, memory = select_rows(state, live), select_rows(memory, live)
    # to the host in one transfer per kind, not a few per sentence (each waits for a GPU)
    weights = None if attention is None else attention.cpu().numpy()     # batch x steps x S
    return [_translation(ids, score, weights, i, length, options) for i, (ids, score, length)
            in enumerate(zip(tokens.tolist(), scores.tolist(), src_len.tolist()))]


def _translation(ids: list[int], score: float, attn: np.ndarray | None, row: int,
                 src_len: int, options: SearchOptions) -> Translation:
    """Cut sentence ``row``'s output after its first ``</s>``."""
    length = ids.index(EOS_ID) + 1
    matrix = None if attn is None else attn[row, :length, :src_len].copy()
    hypothesis = Hypothesis(tuple(ids[:length]), score, normalise(score, length, options), matrix)
    return Translation((hypothesis,))
