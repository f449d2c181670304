"""The RNN language model (spec section 3) and the LSTM equations it relies on.

``embedding -> rnn -> output``, named as the translation decoder's submodules, so the state
dict is the LM->decoder contract (:mod:`rnnsearch.models.lm_transfer`). PyTorch's conventions:
``nn.LSTM`` orders gate rows i, f, g, o; ``nn.GRU``'s ``z`` *keeps* the old state (the spec's
``z`` is ``1 - z``) and its reset gate applies after the recurrent matrix."""
from __future__ import annotations

import torch
from torch import nn

from rnnsearch.models.rnn import make_rnn

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # h (RNN, GRU) or (h, c) (LSTM)


def lstm_step(x: torch.Tensor, h_prev: torch.Tensor, c_prev: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step written out from the spec's equations (for tests; training uses nn.LSTM).
    ``x``: batch x E, ``h_prev``/``c_prev``: batch x H, ``weight``: 4H x (H + E) acting on
    ``[h_{t-1}; x_t]``, ``bias``: 4H; the rows are the gates in the order f, i, o, c~::

        f, i, o = sigmoid(W [h_{t-1}; x_t] + b)     forget, input, output gates
        c~      = tanh(W_c [h_{t-1}; x_t] + b_c)    candidate cell
        c_t     = f * c_{t-1} + i * c~
        h_t     = o * tanh(c_t)                     returned with c_t, both batch x H
    """
    pre = torch.cat([h_prev, x], dim=-1) @ weight.T + bias  # batch x 4H
    f, i, o, g = pre.chunk(4, dim=-1)  # each batch x H
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def detach_state(state: State) -> State:
    """The state cut from the graph that made it (truncated BPTT carries it forward like this)."""
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)  # type: ignore[return-value]
    return state.detach()


class LanguageModel(nn.Module):
    """Next-word prediction: ``P(x_{t+1} | x_<=t) = softmax(W_y h_t + b_y)``."""

    def __init__(self, cell: str, vocab_size: int, embedding_size: int, hidden_size: int,
                 num_layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.cell = cell
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.rnn = make_rnn(cell, embedding_size, hidden_size, num_layers, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, x: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """``x``: batch x steps (ids) -> logits batch x steps x V, and the final state."""
        emb = self.drop(self.embedding(x))  # batch x steps x E
        out, state = self.rnn(emb, state)  # batch x steps x H
        return self.output(self.drop(out)), state

    def meta(self) -> dict[str, int | str]:
        """Shapes and cell type, as ``decoder_init.pt`` records them."""
        return {"cell": self.cell, "vocab_size": self.embedding.num_embeddings,
                "embedding_size": self.embedding.embedding_dim,
                "hidden_size": self.rnn.hidden_size, "num_layers": self.rnn.num_layers}
