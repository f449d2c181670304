"""Recurrent cells: build ``nn.GRU``/``nn.LSTM``/``nn.RNN`` and step them one time step at a time.

The decoder keeps a standard module named ``rnn`` (so the pretrained LM's weights load by name)
but steps it with :func:`cell_step`: the previous words' projection ``W_ih[:, :E] y`` is computed
for all steps before the loop, so a step adds only the recurrent projection and that of what
depends on the previous step (attention context or fed-back attentional state)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

RNN_CLASSES = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}
GATES = {"gru": 3, "lstm": 4, "rnn": 1}


def make_rnn(cell: str, input_size: int, hidden_size: int, num_layers: int = 1,
             bidirectional: bool = False, dropout: float = 0.0) -> nn.RNNBase:
    """A batch-first ``nn.GRU``/``nn.LSTM``/``nn.RNN`` (tanh) with dropout between layers."""
    if cell not in RNN_CLASSES:
        raise ValueError(f"cell: must be one of {sorted(RNN_CLASSES)}, got {cell!r}")
    return RNN_CLASSES[cell](input_size, hidden_size, num_layers=num_layers, batch_first=True,
                             bidirectional=bidirectional,
                             dropout=dropout if num_layers > 1 else 0.0)


def orthogonal_init_(rnn: nn.RNNBase) -> None:
    """Initialise every recurrent matrix orthogonally, one gate block at a time."""
    hidden = rnn.hidden_size
    for name, param in rnn.named_parameters():
        if name.startswith("weight_hh"):
            with torch.no_grad():
                for block in param.split(hidden, dim=0):  # (gates*H) x H -> gates blocks of H x H
                    nn.init.orthogonal_(block)


def cell_step(cell: str, gates_x: Tensor, h: Tensor, c: Tensor | None,
              w_hh: Tensor, b_hh: Tensor) -> tuple[Tensor, Tensor | None]:
    """One GRU/LSTM/tanh-RNN step from ``gates_x = W_ih x + b_ih`` (batch x gates*H); ``h``, ``c``:
    batch x H. Equations and gate order as in ``nn.GRU``/``LSTM``/``RNN``: the fused run agrees."""
    gates_h = F.linear(h, w_hh, b_hh)  # batch x (gates*H)
    if cell == "gru":
        x_r, x_z, x_n = gates_x.chunk(3, dim=1)
        h_r, h_z, h_n = gates_h.chunk(3, dim=1)
        r = torch.sigmoid(x_r + h_r)
        z = torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return n + z * (h - n), None
    if cell == "lstm":
        i, f, g, o = (gates_x + gates_h).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    return torch.tanh(gates_x + gates_h), None


def layer_weights(rnn: nn.RNNBase, layer: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(w_ih, b_ih, w_hh, b_hh)`` of one layer of a unidirectional ``rnn``."""
    return (getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"),
            getattr(rnn, f"weight_hh_l{layer}"), getattr(rnn, f"bias_hh_l{layer}"))
