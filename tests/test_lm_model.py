"""The LSTM equations (spec section 3), nn.LSTM against them, and the GRU convention."""
from __future__ import annotations

import math

import torch
from torch import nn

from rnnsearch.lm.model import LanguageModel, lstm_step

C_PREV = [0.8, -0.4]
F_GATE, I_GATE, C_TILDE, O_GATE = [0.75, 0.25], [0.5, 0.8], [0.2, 0.3], [0.5, 0.8]


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _worked_example_bias() -> torch.Tensor:
    """Bias (rows f, i, o, c~) that, with zero weights, gives the spec's gate values."""
    pre = [_logit(p) for p in F_GATE + I_GATE + O_GATE] + [math.atanh(v) for v in C_TILDE]
    return torch.tensor(pre, dtype=torch.float64)


def _spec_to_torch(weight: torch.Tensor, bias: torch.Tensor, hidden: int) -> nn.LSTM:
    """An nn.LSTM computing lstm_step(weight, bias): split [h; x] and reorder f,i,o,c~ -> i,f,g,o."""
    f, i, o, g = weight.split(hidden)
    bf, bi, bo, bg = bias.split(hidden)
    lstm = nn.LSTM(weight.shape[1] - hidden, hidden, batch_first=True).double()
    with torch.no_grad():
        ordered = torch.cat([i, f, g, o])  # 4H x (H + E)
        lstm.weight_hh_l0.copy_(ordered[:, :hidden])
        lstm.weight_ih_l0.copy_(ordered[:, hidden:])
        lstm.bias_ih_l0.copy_(torch.cat([bi, bf, bg, bo]))
        lstm.bias_hh_l0.zero_()
    return lstm


def test_lstm_worked_example():
    weight = torch.zeros(8, 2 + 1, dtype=torch.float64)  # 4H x (H + E), H = 2, E = 1
    x, h_prev = torch.ones(1, 1, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64)
    h, c = lstm_step(x, h_prev, torch.tensor([C_PREV], dtype=torch.float64), weight,
                     _worked_example_bias())
    assert torch.allclose(c, torch.tensor([[0.7, 0.14]], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h, torch.tensor([[0.302, 0.111]], dtype=torch.float64), atol=5e-4)


def test_nn_lstm_computes_the_same_for_set_weights():
    torch.manual_seed(0)
    hidden, emb = 3, 4
    weight = torch.randn(4 * hidden, hidden + emb, dtype=torch.float64)
    bias = torch.randn(4 * hidden, dtype=torch.float64)
    x = torch.randn(2, emb, dtype=torch.float64)
    h0, c0 = torch.randn(2, hidden, dtype=torch.float64), torch.randn(2, hidden, dtype=torch.float64)
    h, c = lstm_step(x, h0, c0, weight, bias)
    lstm = _spec_to_torch(weight, bias, hidden)
    out, (h_t, c_t) = lstm(x[:, None], (h0[None], c0[None]))
    assert torch.allclose(out[:, 0], h, atol=1e-12)
    assert torch.allclose(c_t[0], c, atol=1e-12)


def test_nn_lstm_reproduces_the_worked_example():
    lstm = _spec_to_torch(torch.zeros(8, 3, dtype=torch.float64), _worked_example_bias(), 2)
    c_prev = torch.tensor([[C_PREV]], dtype=torch.float64)
    _, (h, c) = lstm(torch.ones(1, 1, 1, dtype=torch.float64), (torch.zeros(1, 1, 2).double(), c_prev))
    assert torch.allclose(c[0], torch.tensor([[0.7, 0.14]], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h[0], torch.tensor([[0.302, 0.111]], dtype=torch.float64), atol=5e-4)


def test_gru_z_keeps_the_previous_state():
    """The documented convention: nn.GRU's h_t = (1 - z) * h~ + z * h_{t-1}."""
    gru = nn.GRU(1, 2, batch_first=True)
    with torch.no_grad():
        for p in gru.parameters():
            p.zero_()
        gru.bias_ih_l0[2:4] = 20.0  # z = sigmoid(20) ~ 1
    h_prev = torch.tensor([[[0.3, -0.6]]])
    _, h = gru(torch.ones(1, 1, 1), h_prev)
    assert torch.allclose(h, h_prev, atol=1e-6)


def test_language_model_shapes_and_meta():
    model = LanguageModel("gru", vocab_size=11, embedding_size=5, hidden_size=7)
    logits, state = model(torch.randint(0, 11, (3, 4)))
    assert logits.shape == (3, 4, 11) and state.shape == (1, 3, 7)
    assert model.meta() == {"cell": "gru", "vocab_size": 11, "embedding_size": 5,
                            "hidden_size": 7, "num_layers": 1}
