"""Output layer and cross-entropy in one pass over row chunks (``train.trainer.fused_loss``).

The eager loss materialises the batch*T x V logits, their log-softmax and a gradient of each,
480 MB apiece at the paper's shapes; :func:`linear_cross_entropy` skips padding rows and computes
each row chunk's gradient ``softmax - onehot`` in the same pass, dropping its logits. Equal to
``F.cross_entropy(F.linear(x, W, b), y, reduction="sum")`` up to float summation order."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from rnnsearch.data.vocab import PAD_ID

# logits per chunk: 2^22 (16 MB fp32; 512 rows at V = 8,000, 139 at 30,000); smaller ran slower
CHUNK_ELEMENTS = 1 << 22


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed token cross-entropy of ``features @ weight.T + bias``; gradients made in forward."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor, bias: Tensor | None,
                targets: Tensor, chunk_rows: int, dtype: torch.dtype | None) -> Tensor:
        grads = _Gradients(features, weight, bias)
        total = _chunked_loss(features, _Output(weight, bias, dtype), targets, chunk_rows, grads)
        ctx.save_for_backward(grads.features, grads.weight, grads.bias)
        ctx.has_bias = bias is not None
        return total

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:
        d_features, d_weight, d_bias = ctx.saved_tensors
        return (d_features * grad_total, d_weight * grad_total,
                d_bias * grad_total if ctx.has_bias else None, None, None, None)


class _Output:
    """The output weight and bias in the products' dtype (autocast's, e.g. bf16, else the
    weight's), converted once per batch; log-softmax and loss stay in the weight's dtype (fp32)."""

    def __init__(self, weight: Tensor, bias: Tensor | None, dtype: torch.dtype | None) -> None:
        self.dtype = dtype or weight.dtype
        self.loss_dtype = weight.dtype
        self.weight = weight.to(self.dtype)                                  # V x D
        self.bias = bias.to(self.dtype) if bias is not None else None        # V

    def log_probs(self, inputs: Tensor) -> Tensor:
        """``inputs``: c x D in the products' dtype -> log-probabilities c x V (loss dtype)."""
        if self.bias is None:
            logits = inputs @ self.weight.t()
        else:
            logits = torch.addmm(self.bias, inputs, self.weight.t())
        # cast first: log_softmax(dtype=) was 1.5x slower on bf16 logits (10x+ on some chunks)
        return torch.log_softmax(logits.to(self.loss_dtype), 1)


def _chunked_loss(features: Tensor, output: _Output, targets: Tensor, chunk_rows: int,
                  grads: _Gradients | None) -> Tensor:
    """``features``: N x D, ``targets``: N ids -> the summed loss over the real tokens (in the
    loss dtype); each chunk's gradient goes into ``grads`` (None: loss only)."""
    rows = (targets != PAD_ID).nonzero().squeeze(1)                      # real tokens: R
    total = torch.zeros((), dtype=output.loss_dtype, device=features.device)
    for start in range(0, rows.numel(), chunk_rows):
        chunk = rows[start:start + chunk_rows]                             # c
        inputs = features.index_select(0, chunk).to(output.dtype)          # c x D
        words = targets.index_select(0, chunk)
        log_probs = output.log_probs(inputs)                               # c x V
        total -= log_probs.gather(1, words.unsqueeze(1)).sum()
        if grads is not None:
            # d loss / d logits = softmax - onehot, made in the log-probabilities' memory
            probs = log_probs.exp_()
            probs.scatter_add_(1, words.unsqueeze(1), probs.new_full((chunk.numel(), 1), -1.0))
            grads.add_chunk(chunk, inputs, probs, output.weight)
    return total


class _Gradients:
    """Gradients of features, weight and bias, summed chunk by chunk, each in its tensor's dtype."""

    def __init__(self, features: Tensor, weight: Tensor, bias: Tensor | None) -> None:
        self.features = torch.zeros_like(features)                          # N x D
        self.weight = torch.zeros_like(weight)                              # V x D
        self.bias = torch.zeros_like(bias) if bias is not None else weight.new_zeros(0)

    def add_chunk(self, chunk: Tensor, inputs: Tensor, d_logits: Tensor, weight: Tensor) -> None:
        """``d_logits``: c x V, the chunk's gradient in the loss dtype; ``inputs`` (c x D) and
        ``weight`` (V x D): the chunk's features and the output weight in the products' dtype."""
        if self.bias.numel():
            self.bias += d_logits.sum(0)
        d_logits = d_logits.to(inputs.dtype)
        self.features.index_copy_(0, chunk, (d_logits @ weight).to(self.features.dtype))
        if self.weight.dtype == inputs.dtype:
            self.weight.addmm_(d_logits.t(), inputs)
        else:    # products in bf16: each chunk's product rounded once, the sum kept in fp32
            self.weight += d_logits.t() @ inputs


def linear_cross_entropy(features: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor,
                         chunk_rows: int = 0) -> Tensor:
    """Summed cross-entropy of the logits ``features @ weight.T + bias`` against ``targets``
    (``PAD_ID`` ignored) without materialising them; a scalar in the weight's dtype.
    ``features``: ... x D, ``weight``: V x D, ``bias``: V or None, ``targets``: ... ids;
    ``chunk_rows``: rows per chunk (0: :data:`CHUNK_ELEMENTS` logits). Under autocast the
    products run in autocast's dtype, the log-softmax in the weight's."""
    chunk_rows = chunk_rows or max(1, CHUNK_ELEMENTS // weight.size(0))
    device = features.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    flat, flat_targets = features.reshape(-1, features.size(-1)), targets.reshape(-1)  # N x D, N
    tracked = [t for t in (features, weight, bias) if t is not None and t.requires_grad]
    with torch.autocast(device, enabled=False):    # the dtypes are set here, not per operation
        if not (torch.is_grad_enabled() and tracked):   # no backward to come: the loss alone
            return _chunked_loss(flat, _Output(weight, bias, dtype), flat_targets, chunk_rows,
                                 grads=None)
        return _LinearCrossEntropy.apply(flat, weight, bias, flat_targets, chunk_rows, dtype)
