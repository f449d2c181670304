"""The output layer and its cross-entropy in one pass over row chunks (``train.trainer.fused_loss``).

The eager training loss materialises the batch*T x V logits, their log-softmax and, in the
backward pass, a gradient of each: 27 MB apiece at the reference shapes (832 target positions x
8,000 words), 480 MB at the paper's (80 x 50 positions x 30,000 words).
:func:`linear_cross_entropy` computes the same summed loss a chunk of rows at a time and, in the
same pass, the chunk's gradient ``softmax - onehot``, which it multiplies straight into the
gradients of the features, the weight and the bias; the chunk's logits are then dropped. Padding
rows (target ``PAD_ID``) are left out before the product. Its loss and gradients equal the eager
``F.cross_entropy(F.linear(x, W, b), y, reduction="sum")``'s within float tolerance
(``tests/test_fused_loss.py``), not bit for bit: the sums run in another order.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from rnnsearch.data.vocab import PAD_ID

# logits per chunk: 2^22 (16 MB in fp32), 512 rows of an 8,000-word vocabulary, 139 of 30,000;
# smaller chunks split the products more finely and ran slower at the reference shapes
CHUNK_ELEMENTS = 1 << 22


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed token cross-entropy of ``features @ weight.T + bias``; gradients made in forward."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor, bias: Tensor | None,
                targets: Tensor, chunk_rows: int) -> Tensor:
        grads = _Gradients(features, weight, bias)
        total = _chunked_loss(features, weight, bias, targets, chunk_rows, grads)
        ctx.save_for_backward(grads.features, grads.weight, grads.bias)
        ctx.has_bias = bias is not None
        return total

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:
        d_features, d_weight, d_bias = ctx.saved_tensors
        return (d_features * grad_total, d_weight * grad_total,
                d_bias * grad_total if ctx.has_bias else None, None, None)


def _chunked_loss(features: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor,
                  chunk_rows: int, grads: _Gradients | None) -> Tensor:
    """``features``: N x D, ``weight``: V x D, ``bias``: V, ``targets``: N ids -> the summed
    loss over the real tokens; each chunk's gradient goes into ``grads`` (None: loss only)."""
    rows = (targets != PAD_ID).nonzero().squeeze(1)                      # real tokens: R
    total = features.new_zeros(())
    for start in range(0, rows.numel(), chunk_rows):
        chunk = rows[start:start + chunk_rows]                             # c
        inputs, words = features.index_select(0, chunk), targets.index_select(0, chunk)
        log_probs = torch.log_softmax(_linear(inputs, weight, bias), 1)   # c x V
        total -= log_probs.gather(1, words.unsqueeze(1)).sum()
        if grads is not None:
            # d loss / d logits = softmax - onehot, made in the log-probabilities' memory
            probs = log_probs.exp_()
            probs.scatter_add_(1, words.unsqueeze(1), probs.new_full((chunk.numel(), 1), -1.0))
            grads.add_chunk(chunk, inputs, probs)
    return total


class _Gradients:
    """The features', weight's and bias's gradients, summed chunk by chunk."""

    def __init__(self, features: Tensor, weight: Tensor, bias: Tensor | None) -> None:
        self.features = torch.zeros_like(features)                          # N x D
        self.weight = torch.zeros_like(weight)                              # V x D
        self.bias = torch.zeros_like(bias) if bias is not None else weight.new_zeros(0)
        self._weight = weight

    def add_chunk(self, chunk: Tensor, inputs: Tensor, d_logits: Tensor) -> None:
        """``d_logits``: c x V, the chunk's gradient; ``inputs``: its c x D features."""
        self.features.index_copy_(0, chunk, d_logits @ self._weight)         # c x D
        self.weight.addmm_(d_logits.t(), inputs)
        if self.bias.numel():
            self.bias += d_logits.sum(0)


def _linear(inputs: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``inputs @ weight.T + bias``: c x D -> c x V."""
    if bias is None:
        return inputs @ weight.t()
    return torch.addmm(bias, inputs, weight.t())


def linear_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor,
                         chunk_rows: int = 0) -> Tensor:
    """Summed cross-entropy of the logits ``features @ weight.T + bias`` against ``targets``,
    padding (``PAD_ID``) ignored, without materialising the logits.

    ``features``: ... x D (the output layer's input), ``weight``: V x D, ``bias``: V or None,
    ``targets``: ... ids (the features' leading shape); ``chunk_rows``: rows per chunk (0:
    :data:`CHUNK_ELEMENTS` logits). Returns a scalar in the features' dtype.
    """
    chunk_rows = chunk_rows or max(1, CHUNK_ELEMENTS // weight.size(0))
    if torch.is_autocast_enabled(features.device.type):
        raise ValueError("linear_cross_entropy runs in the features' dtype; call it outside "
                         "autocast (train.trainer.fused_loss needs precision 32-true)")
    flat, flat_targets = features.reshape(-1, features.size(-1)), targets.reshape(-1)  # N x D, N
    tracked = [t for t in (features, weight, bias) if t is not None and t.requires_grad]
    if not (torch.is_grad_enabled() and tracked):   # no backward to come: the loss alone
        return _chunked_loss(flat, weight, bias, flat_targets, chunk_rows, grads=None)
    return _LinearCrossEntropy.apply(flat, weight, bias, flat_targets, chunk_rows)
