"""Gradient-flow diagnostic (spec section 3): how far back does the loss reach?

``|d loss_T / d h_{T-k}|`` against k over a window of T words: a vanilla RNN multiplies by
``W_h`` and a tanh derivative each step, so its curve falls geometrically; gated cells' additive
paths let it fall more slowly. For an LSTM the gradient is taken with respect to h (not c)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from rnnsearch.lm.model import LanguageModel, State  # noqa: E402

CELL_ORDER = ("rnn", "gru", "lstm")


def _hidden(state: State) -> torch.Tensor:
    return state[0] if isinstance(state, tuple) else state


def gradient_norms(model: LanguageModel, x: torch.Tensor, y: torch.Tensor) -> list[float]:
    """``x``: batch x T ids, ``y``: batch (the next word). Entry k of the result is the batch
    mean of ``|d loss_T / d h_{T-k}|`` for k = 0 .. T-1 (the norm over layers and units)."""
    model.eval()
    emb = model.embedding(x)  # batch x T x E
    state: State | None = None
    hiddens = []
    for t in range(x.shape[1]):
        _, state = model.rnn(emb[:, t: t + 1], state)  # the next step reads this very state
        hiddens.append(_hidden(state))  # layers x batch x H
    logits = model.output(hiddens[-1][-1])  # batch x V
    loss = F.cross_entropy(logits, y, reduction="sum")  # sum: each row's gradient is its own
    grads = torch.autograd.grad(loss, hiddens)
    norms = [g.pow(2).sum(dim=(0, 2)).sqrt().mean().item() for g in grads]  # T
    return norms[::-1]


def sample_windows(stream: torch.Tensor, length: int, samples: int,
                   seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` random windows of ``length`` words from ``[N]`` ids and the word after each."""
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, stream.numel() - length - 1, (samples,), generator=generator)
    index = starts[:, None] + torch.arange(length)  # samples x length
    return stream[index], stream[starts + length]


def gradient_flow(stream: torch.Tensor, vocab_size: int, embedding_size: int, hidden_size: int,
                  max_k: int, samples: int, seed: int) -> dict[str, list[float]]:
    """Curves ``{cell: [norm at k = 0 .. max_k]}`` for freshly initialised models of each cell."""
    x, y = sample_windows(stream, max_k + 1, samples, seed)
    curves = {}
    for cell in CELL_ORDER:
        torch.manual_seed(seed)
        model = LanguageModel(cell, vocab_size, embedding_size, hidden_size)
        curves[cell] = gradient_norms(model, x, y)
    return curves


def gradient_flow_figure(curves: dict[str, list[float]]) -> plt.Figure:
    """One log-scale curve per cell: gradient norm against distance k."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for cell, norms in curves.items():
        ax.semilogy(range(len(norms)), norms, label=cell.upper())
    ax.set_xlabel("k (steps back from the loss)")
    ax.set_ylabel("|d loss_T / d h_(T-k)|")
    ax.set_title("Gradient flow through time (random initialisation)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def curve_rows(curves: dict[str, list[float]]) -> list[dict[str, float]]:
    """One row per distance: ``{"k": k, "<cell>": norm, ...}`` (the DVC plot's CSV rows)."""
    return [{"k": k, **{cell: norms[k] for cell, norms in curves.items()}}
            for k in range(len(next(iter(curves.values()))))]
