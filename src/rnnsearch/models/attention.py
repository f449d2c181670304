"""Attention: one module, pluggable score functions, global or local (Luong) windows.

Scores: ``additive``/``concat`` ``v^T tanh(W q + U h_s)``, ``dot``, ``scaled_dot``, ``general``
``q^T (W_a h_s)``. Keys (the source-only part, :meth:`Attention.project_keys`) are computed once
per batch and passed as ``Memory.keys``, not module state, so beam search can reorder them.
``local_m``/``local_p`` keep ``[p_t - D, p_t + D]``; local-p adds its Gaussian to the scores
before the softmax (unlike the paper), so weights sum to 1."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class Attention(nn.Module):
    """Masked attention of queries over source annotations; returns context and weights."""

    def __init__(self, score: str, query_size: int, value_size: int, attention_size: int,
                 kind: str = "global", window: int = 10) -> None:
        super().__init__()
        if score in ("dot", "scaled_dot") and query_size != value_size:
            raise ValueError(f"score {score!r} needs query size {query_size} == annotation size "
                             f"{value_size}")
        self.score, self.kind, self.window = score, kind, window
        self.key_proj: nn.Module | None = None
        if score in ("additive", "concat"):
            self.key_proj = nn.Linear(value_size, attention_size)                 # U_a
            self.query_proj = nn.Linear(query_size, attention_size, bias=False)   # W_a
            self.v = nn.Linear(attention_size, 1, bias=False)                     # v_a
        elif score == "general":
            self.key_proj = nn.Linear(value_size, query_size, bias=False)         # W_a
        if kind == "local_p":
            self.position = nn.Sequential(nn.Linear(query_size, attention_size, bias=False),
                                          nn.Tanh(), nn.Linear(attention_size, 1, bias=False))

    def project_keys(self, values: Tensor) -> Tensor:
        """The source-only part of the score: batch x src_len x key_size (once per batch)."""
        return values if self.key_proj is None else self.key_proj(values)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor, lengths: Tensor,
                steps: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Context batch x T x V and weights batch x T x src_len for ``query`` batch x T x Q (T = 1:
        one step). ``keys``/``values``: batch x src_len x K/V; ``mask``: batch x src_len (True =
        real word); ``lengths``: batch; ``steps``: batch x T target positions (``local_m``)."""
        scores = self._scores(query, keys)                   # batch x T x src_len
        allowed = mask.unsqueeze(1)                          # batch x 1 x src_len
        if self.kind != "global":
            distance = self._distance(query, lengths, steps, keys.size(1))  # batch x T x src_len
            allowed = allowed & (distance.abs() <= self.window)
            if self.kind == "local_p":
                sigma = self.window / 2
                scores = scores - distance.pow(2) / (2 * sigma * sigma)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        return torch.bmm(weights, values), weights

    def _scores(self, query: Tensor, keys: Tensor) -> Tensor:
        if self.score in ("additive", "concat"):
            # batch x T x 1 x A + batch x 1 x src_len x A -> batch x T x src_len
            hidden = torch.tanh(self.query_proj(query).unsqueeze(2) + keys.unsqueeze(1))
            return self.v(hidden).squeeze(-1)
        scores = torch.bmm(query, keys.transpose(1, 2))     # batch x T x src_len
        if self.score == "scaled_dot":
            scores = scores / math.sqrt(query.size(-1))
        return scores

    def _distance(self, query: Tensor, lengths: Tensor, steps: Tensor | None,
                  src_len: int) -> Tensor:
        """``s - p_t`` for every source position s: batch x T x src_len."""
        last = (lengths - 1).to(query.dtype).unsqueeze(1)    # batch x 1
        if self.kind == "local_m":
            if steps is None:
                raise ValueError("local_m attention needs the target positions (steps)")
            centre = torch.minimum(steps.to(query.dtype), last)                    # batch x T
        else:
            predicted = torch.sigmoid(self.position(query).squeeze(-1))            # batch x T
            centre = torch.minimum(lengths.to(query.dtype).unsqueeze(1) * predicted, last)
        positions = torch.arange(src_len, device=query.device, dtype=query.dtype)
        return positions.view(1, 1, -1) - centre.unsqueeze(-1)
