"""CUDA graphs for the attention decoder's training loop (``train.trainer.cuda_graphs``).

Why: teacher forcing through RNNsearch's decoder runs one small step per target word (attention
over the source, the GRU update), a few dozen kernels forward and backward each. On a GPU such
small kernels are bound by their launches from Python, not by arithmetic, so a step costs about
the same at width 256 as at the paper's width 1000 (expected, not measured yet: docs/gpu.md).

The same holds for Luong's decoder with input feeding. (RNNencdec, and Luong without input
feeding, run the fused cuDNN RNN over the whole sequence: nothing to graph.)

What: the loop (the decoder's ``attention_loop``: RNNsearch's attend-then-update step, Luong's
update-attend-feed step) is captured
once per batch shape with :func:`torch.cuda.make_graphed_callables`, forward and backward; a
training step then replays two graphs instead of launching the loop's kernels one by one. The
rest of the step (embeddings, the cuDNN encoder, the output layer and loss over all positions at
once, the optimizer) stays as it was: few, large kernels.

Shapes: a graph replays fixed shapes, so each training batch is padded
(:func:`rnnsearch.training.data.pad_batch`) to ``rows`` sentences and to source and target
lengths rounded up to a multiple of ``multiple``:
a few dozen shapes for a whole run, each captured the first time it comes. Padding changes no
number that matters: padded target positions come after the real ones (the loop is causal) and
are ignored by the loss, padded source positions are masked out of attention, and padded rows
have no target tokens.

Memory: every shape's graphs share one memory pool. That is safe because a step replays the
forward graph of one shape and then its backward graph, never interleaved with another shape's.

Checked: the run's first capture is replayed once against the eager loop on other inputs (the
capture's, halved) before training goes on: the loop's outputs, and the gradients of a fixed
random projection of them with respect to its inputs and the decoder's parameters, must agree
to :data:`CHECK_TOLERANCE` (relative). A graph that computed something else (a stale input, a
gradient that does not reach a parameter) would otherwise train a wrong model without a word;
this way it is one warning, the eager loop, and the reason in the metrics, as for a capture CUDA
refuses. (Not with dropout inside the loop, between stacked decoder layers: the two runs would
draw different masks.)

Validation and decoding (no gradient, or eval mode) and the CPU run the eager loop: the CPU
path, and with it the default run's numbers, are exactly what they were.
"""
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
    """A decoder's attention loop as a module of tensors only (what a graph capture takes).

    The decoder is its submodule (shared, not copied): every parameter the loop uses is on the
    capture's input surface, so the gradients a replay computes reach the decoder's own
    parameters; the ones the loop does not use get none. ``layout`` names the optional state
    fields passed after the step positions (``cell`` for an LSTM, ``feed`` for input feeding).
    """

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
    """``max |a - b| / max |b|``; a missing gradient equals a missing or an all-zero one (inf
    against any other), and tensors of different shapes differ infinitely."""
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
    """``loop(*inputs)`` on fresh copies of the inputs: its float outputs, the gradients of
    ``sum(output * weight)`` with respect to the inputs that require them and ``params``
    (``.grad`` is left alone), and the weights (fixed random ones when not given). Everything
    is copied: a graph's outputs and gradients are overwritten by its next replay."""
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
    """The largest :func:`relative_difference` between ``graphed`` and ``eager`` (the same
    loop) on ``inputs``: over the outputs, and over the gradients of a fixed random projection
    of them with respect to the float inputs and ``eager``'s parameters."""
    params = [p for p in eager.parameters() if p.requires_grad]
    ours, our_grads, weights = outputs_and_gradients(graphed, inputs, params)
    theirs, their_grads, _ = outputs_and_gradients(eager, inputs, params, weights)
    if len(ours) != len(theirs):
        return float("inf")
    pairs = [*zip(ours, theirs), *zip(our_grads, their_grads)]
    return max((relative_difference(a, b) for a, b in pairs), default=0.0)


def halved(inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The float inputs halved (the rest as they are), each still requiring a gradient where
    it did: inputs a capture did not see, in the form it expects."""
    return tuple((t.detach() * 0.5).requires_grad_(t.requires_grad) if t.is_floating_point()
                 else t for t in inputs)


@contextlib.contextmanager
def _stale_streams_joined() -> Iterator[None]:
    """During a capture, let autograd move onto the capturing stream the gradients of the
    decoder parameters that this step's eager forward already used on the default stream
    (their ``AccumulateGrad`` nodes remember that stream; torch 2.11 then invalidates the
    capture, torch >= 2.12 refuses it unless ``set_override_stale_capture_stream`` is on).
    A no-op where torch lacks the setting; the previous setting is restored after."""
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
    """The active CUDA autocast (bf16-mixed) with its weight cache off, which graph capture
    requires; a no-op context when autocast is off."""
    enabled = torch.is_autocast_enabled("cuda")
    dtype = torch.get_autocast_dtype("cuda") if enabled else torch.bfloat16
    return torch.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=False)


class GraphedLoops:
    """Runs a decoder's ``attention_loop`` through one captured graph per input shape (a
    ``loop_runner`` of the decoder); falls back to the eager loop off the GPU, in eval mode
    and without gradients."""

    def __init__(self, decoder: RecurrentDecoder, warmup: int = 2) -> None:
        self.decoder, self.warmup = decoder, warmup
        self.graphs: dict[tuple, Any] = {}
        self.pool: Any = None
        self.capture_seconds = 0.0          # wall time spent warming up and capturing
        self.error: str | None = None       # why a capture failed (the loop then runs eagerly)
        self.check_difference: float | None = None   # the first capture against the eager loop

    def dropout_in_loop(self) -> bool:
        """Dropout between stacked decoder layers, inside the loop (graph and eager would draw
        different masks, so the check cannot compare them)."""
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
        """:meth:`_capture`; when it fails (an operation CUDA cannot capture, memory), the run
        goes on with the eager loop (a warning, and ``error`` for the metrics) rather than
        losing its progress; returns None then."""
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
        """Drop every captured graph and their memory pool, and give the pool's memory back:
        once a capture failed the loop runs eagerly and needs it (each shape's graphs hold
        their activations; at the paper's width six shapes of 80 sentences filled an H200's
        141 GB, after which even the eager loop ran out of memory)."""
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
        """What a run's metrics record: shapes captured, seconds spent capturing, and why
        capturing stopped, if it failed."""
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
    """Make ``model``'s teacher forcing replay CUDA graphs of its attention loop; returns the
    runner (its :meth:`GraphedLoops.stats` go to the metrics). A model without the loop fails
    naming ``key``: it already runs the fused cuDNN RNN."""
    if not has_attention_loop(model):
        raise ConfigError(f"{key}: model {model.config.model!r}"
                          f"{'' if model.config.model != 'luong' else ' without input feeding'} "
                          f"has no step-by-step decoder loop to graph (teacher forcing runs the "
                          f"fused cuDNN RNN already); set it to false")
    decoder = model.decoder
    runner = GraphedLoops(decoder)
    decoder.loop_runner = runner
    return runner
