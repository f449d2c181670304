"""The gradient-flow diagnostic: one curve per cell, and the vanilla RNN vanishes fastest."""
from __future__ import annotations

import torch

from rnnsearch.lm.gradient_flow import curve_rows, gradient_flow, gradient_norms
from rnnsearch.lm.model import LanguageModel


def test_norm_at_distance_zero_is_the_output_gradient():
    torch.manual_seed(0)
    model = LanguageModel("rnn", vocab_size=7, embedding_size=3, hidden_size=4)
    x, y = torch.randint(0, 7, (1, 5)), torch.tensor([2])
    norms = gradient_norms(model, x, y)
    assert len(norms) == 5
    h = model(x)[1][-1].detach().requires_grad_(True)  # the last hidden state, batch x H
    loss = torch.nn.functional.cross_entropy(model.output(h), y, reduction="sum")
    (grad,) = torch.autograd.grad(loss, h)
    assert abs(norms[0] - grad.norm().item()) < 1e-5


def test_vanilla_rnn_vanishes_fastest():
    stream = torch.randint(0, 50, (400,), generator=torch.Generator().manual_seed(1))
    curves = gradient_flow(stream, vocab_size=50, embedding_size=32, hidden_size=64, max_k=25,
                           samples=8, seed=0)
    assert list(curves) == ["rnn", "gru", "lstm"]
    assert all(len(c) == 26 for c in curves.values())
    decay = {cell: c[25] / c[0] for cell, c in curves.items()}
    assert decay["rnn"] < decay["gru"] and decay["rnn"] < decay["lstm"]
    rows = curve_rows(curves)
    assert len(rows) == 26 and list(rows[3]) == ["k", "rnn", "gru", "lstm"]
    assert rows[3]["k"] == 3 and rows[3]["gru"] == curves["gru"][3]
