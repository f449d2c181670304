"""CUDA graphs for the attention decoder's training loop (``train.trainer.cuda_graphs``).

Teacher forcing through RNNsearch's decoder (and Luong's with input feeding) is dozens of small
kernels per target word, bound by Python launches, so ``attention_loop`` is captured forward and
backward once per batch shape (:func:`torch.cuda.make_graphed_callables`); batches are padded to
fixed shapes (:func:`rnnsearch.training.data.pad_to_shape`), all in one memory pool (a step
replays one shape's forward then backward). The first capture is checked against the eager loop
on halved inputs (outputs and gradients, to :data:`CHECK_TOLERANCE`; not with dropout inside the
loop), lest a wrong graph silently train a wrong model. A failed capture or check warns and runs
eager, as the CPU, validation and decoding always do."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from rnnsearch.errors import ConfigError
from rnnsearch.models.seq2seq import Seq2Seq
from rnnsearch.models.decoder import BahdanauDecoder, LuongDecoder, RecurrentDecoder
from rnnsearch.models.state import DecoderState, Memory
from rnnsearch.training.checkpoints import log

OPTIONAL_STATE = ("cell", "feed")      # DecoderState fields a loop may or may not have
CHECK_TOLERANCE = 1e-2                 # graphed vs eager: the same kernels; a bug is O(1)


class LoopModule(nn.Module):
    """A decoder's attention loop as a module of tensors only (what a graph capture takes). The
    decoder is a shared submodule, so a replay's gradients reach its parameters; ``layout`` names
    the optional state fields after ``step`` (``cell``, ``feed``)."""

    def __init__(self, decoder: RecurrentDecoder, layout: tuple[str, ...]) -> None:
        super().__init__()
        self.decoder, self.layout = decoder, layout

    def forward(self, word_gates: Tensor, keys: Tensor, values: Tensor, mask: Tensor,
                lengths: Tensor, hidden: Tensor, step: Tensor, *optional: Tensor
                ) -> tuple[Tensor, ...]:
        """``hidden``: batch x layers x H; ``step``: batch target positions so far."""
        fields = dict(zip(self.layout, optional))
        memory = Memory(values, keys, mask, lengths, hidden)        # summary unused by the loop
        state = DecoderState(hidden, fields.get("cell"), fields.get("feed"), step)
        return self.decoder.attention_loop(word_gates, memory, state)


def relative_difference(a: Tensor | None, b: Tensor | None) -> float:
    """``max |a - b| / max |b|``; None equals None or all zeros (else inf); other shapes: inf."""
    if a is None or b is None:
        other = b if a is None else a
        return 0.0 if other is None or not bool(other.any()) else float("inf")
    if a.shape != b.shape:
        return float("inf")
    if b.numel() == 0:
        return 0.0
    return float((a.float() - b.float()).abs().max()) / max(float(b.float().abs().max()), 1e-12)


def outputs_and_gradients(loop: Any, inputs: tuple[Tensor, ...], params: list[Tensor],
                          weights: list[Tensor] | None = None
                          ) -> tuple[list[Tensor], list[Tensor | None], list[Tensor]]:
    """``loop(*inputs)`` on copies: its float outputs, the gradients of ``sum(output * weight)``
    w.r.t. the grad-requiring inputs and ``params``, and the weights (fixed random by default).
    All copied, since a graph's next replay overwrites them; ``.grad`` is left alone."""
    args = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
    outputs = [o for o in loop(*args) if o.is_floating_point()]
    if weights is None:
        weights = [torch.randn(o.shape, generator=torch.Generator().manual_seed(i)).to(o.device)
                   for i, o in enumerate(outputs)]
    total = sum((o.float() * w).sum() for o, w in zip(outputs, weights))
    wrt = [a for a in args if a.requires_grad] + params
    grads = torch.autograd.grad(total, wrt, allow_unused=True)
    return ([o.detach().clone() for o in outputs],
            [None if g is None else g.detach().clone() for g in grads], weights)


def loop_disagreement(graphed: Any, eager: nn.Module, inputs: tuple[Tensor, ...]) -> float:
    """Largest :func:`relative_difference` of ``graphed`` and ``eager`` outputs and gradients."""
    params = [p for p in eager.parameters() if p.requires_grad]
    ours, our_grads, weights = outputs_and_gradients(graphed, inputs, params)
    theirs, their_grads, _ = outputs_and_gradients(eager, inputs, params, weights)
    if len(ours) != len(theirs):
        return float("inf")
    pairs = [*zip(ours, theirs), *zip(our_grads, their_grads)]
    return max((relative_difference(a, b) for a, b in pairs), default=0.0)


def halved(inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The float inputs halved (same ``requires_grad``): inputs a capture did not see."""
    return tuple((t.detach() * 0.5).requires_grad_(t.requires_grad) if t.is_floating_point()
                 else t for t in inputs)


@contextlib.contextmanager
def _stale_streams_joined() -> Iterator[None]:
    """Turn on ``set_override_stale_capture_stream`` (where torch has it) during a capture:
    the eager forward's ``AccumulateGrad`` nodes remember the default stream, which torch 2.11
    silently invalidates and torch >= 2.12 refuses."""
    override = getattr(torch.autograd.graph, "set_override_stale_capture_stream", None)
    if override is None:
        yield
        return
    before = torch._C._override_stale_capture_stream()
    override(True)
    try:
        yield
    finally:
        override(before)


def _autocast_without_cache() -> Any:
    """The active CUDA autocast with its weight cache off (capture requires it); no-op when off."""
    enabled = torch.is_autocast_enabled("cuda")
    dtype = torch.get_autocast_dtype("cuda") if enabled else torch.bfloat16
    return torch.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=False)


class GraphedLoops:
    """A decoder's ``loop_runner``: ``attention_loop`` through one captured graph per input shape;
    eager off the GPU, in eval mode and without gradients."""

    def __init__(self, decoder: RecurrentDecoder, warmup: int = 2) -> None:
        self.decoder, self.warmup = decoder, warmup
        self.graphs: dict[tuple, Any] = {}
        self.pool: Any = None
        self.capture_seconds = 0.0          # wall time spent warming up and capturing
        self.error: str | None = None       # why a capture failed (the loop then runs eagerly)
        self.check_difference: float | None = None   # the first capture against the eager loop

    def dropout_in_loop(self) -> bool:
        """Dropout between stacked decoder layers (graph and eager masks differ: no check)."""
        config = self.decoder.config
        return self.decoder.training and config.decoder_layers > 1 and config.dropout > 0

    def is_gpu_training(self, word_gates: Tensor) -> bool:
        """Teacher forcing on a GPU with gradients: what the graphs are for."""
        return word_gates.is_cuda and self.decoder.training and torch.is_grad_enabled()

    def __call__(self, word_gates: Tensor, memory: Memory, state: DecoderState
                 ) -> tuple[Tensor, ...]:
        if self.error is not None or not self.is_gpu_training(word_gates):
            return self.decoder.attention_loop(word_gates, memory, state)
        optional = {name: getattr(state, name) for name in OPTIONAL_STATE
                    if getattr(state, name) is not None}
        inputs = (word_gates, memory.keys, memory.values, memory.mask, memory.lengths,
                  state.hidden, state.step, *optional.values())
        layout = tuple(optional)
        key = (layout, *((tuple(t.shape), t.dtype, t.requires_grad) for t in inputs))
        with _autocast_without_cache():
            graphed = self.graphs.get(key) or self._capture_or_give_up(key, inputs, layout)
            if graphed is not None:
                return graphed(*inputs)
        return self.decoder.attention_loop(word_gates, memory, state)

    def _capture_or_give_up(self, key: tuple, inputs: tuple[Tensor, ...],
                            layout: tuple[str, ...]) -> Any:
        """:meth:`_capture`, or None after a failure (warned, kept in ``error``): the run then
        goes on with the eager loop rather than losing its progress."""
        try:
            with _stale_streams_joined():
                return self._capture(key, inputs, layout)
        except (RuntimeError, AssertionError) as err:
            self.error = " ".join(str(err).split())[:300] or type(err).__name__
        self.release()
        log.warning("warning: train.trainer.cuda_graphs: capturing the decoder loop for "
                    "shapes %s failed (%s); training goes on without CUDA graphs",
                    [shape for shape, _, _ in key[1:]], self.error)
        return None

    def release(self) -> None:
        """Drop every graph and give their pool's memory back for the eager loop (at the paper's
        width six shapes of 80 sentences filled an H200's 141 GB)."""
        self.graphs.clear()
        self.pool = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _capture(self, key: tuple, inputs: tuple[Tensor, ...], layout: tuple[str, ...]) -> Any:
        """Capture the loop's forward and backward for these shapes (the sample arguments are
        detached copies: warm-up and capture change no parameter and no gradient)."""
        torch.cuda.synchronize()              # the steps queued so far are not the capture's
        start = time.perf_counter()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        samples = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
        loop = LoopModule(self.decoder, layout)
        graphed = torch.cuda.make_graphed_callables(
            loop, samples, num_warmup_iters=self.warmup, allow_unused_input=True, pool=self.pool)
        if not self.graphs and not self.dropout_in_loop():
            self.check_difference = loop_disagreement(graphed, loop, halved(inputs))
            if not self.check_difference <= CHECK_TOLERANCE:
                raise RuntimeError(f"the captured loop disagrees with the eager loop (largest "
                                   f"relative difference {self.check_difference:.1e} > "
                                   f"{CHECK_TOLERANCE:g})")
        torch.cuda.synchronize()
        self.graphs[key] = graphed
        self.capture_seconds += time.perf_counter() - start
        return graphed

    @property
    def captured(self) -> int:
        """How many shapes have a graph."""
        return len(self.graphs)

    def stats(self) -> dict[str, Any]:
        """For the metrics: shapes captured, capture seconds, check difference, error."""
        stats: dict[str, Any] = {"cuda_graph_shapes": self.captured,
                                 "cuda_graph_capture_seconds": round(self.capture_seconds, 1)}
        if self.check_difference is not None:
            stats["cuda_graph_check_difference"] = self.check_difference
        if self.error:
            stats["cuda_graph_error"] = self.error
        return stats


def has_attention_loop(model: Seq2Seq) -> bool:
    """Whether teacher forcing runs a step-by-step attention loop (RNNsearch; Luong with input
    feeding); the other models run the fused cuDNN RNN over the whole sequence."""
    if isinstance(model.decoder, LuongDecoder):
        return model.config.input_feeding
    return isinstance(model.decoder, BahdanauDecoder) and model.decoder.attention is not None


def enable_cuda_graphs(model: Seq2Seq, key: str = "train.trainer.cuda_graphs") -> GraphedLoops:
    """Make ``model``'s teacher forcing replay graphs of its loop; returns the runner. A model
    without the loop is a :class:`ConfigError` naming ``key``."""
    if not has_attention_loop(model):
        raise ConfigError(f"{key}: model {model.config.model!r}"
                          f"{'' if model.config.model != 'luong' else ' without input feeding'} "
                          f"has no step-by-step decoder loop to graph (teacher forcing runs the "
                          f"fused cuDNN RNN already); set it to false")
    runner = model.decoder.loop_runner = GraphedLoops(model.decoder)
    return runner
