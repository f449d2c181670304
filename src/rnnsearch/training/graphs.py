"""CUDA graphs for the attention decoder's training loop (``train.trainer.cuda_graphs``).

Why: teacher forcing through RNNsearch's decoder runs one small step per target word (attention
over the source, the GRU update), a few dozen kernels forward and backward each. On a GPU a step
at batch 80 then costs about the same ~40 ms at width 256 as at the paper's width 1000: the time
goes to launching kernels from Python, not to arithmetic (measured on an H200, issue 12).

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

Validation and decoding (no gradient, or eval mode) and the CPU run the eager loop: the CPU
path, and with it the default run's numbers, are exactly what they were.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor, nn

from rnnsearch.config.base import ConfigError
from rnnsearch.models import Seq2Seq
from rnnsearch.models.decoder import BahdanauDecoder, LuongDecoder, RecurrentDecoder
from rnnsearch.models.state import DecoderState, Memory
from rnnsearch.training.checkpoints import log

OPTIONAL_STATE = ("cell", "feed")      # DecoderState fields a loop may or may not have


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
            return self._capture(key, inputs, layout)
        except (RuntimeError, AssertionError) as err:
            self.error = " ".join(str(err).split())[:300] or type(err).__name__
            log.warning("warning: train.trainer.cuda_graphs: capturing the decoder loop for "
                        "shapes %s failed (%s); training goes on without CUDA graphs",
                        [shape for shape, _, _ in key[1:]], self.error)
            return None

    def _capture(self, key: tuple, inputs: tuple[Tensor, ...], layout: tuple[str, ...]) -> Any:
        """Capture the loop's forward and backward for these shapes (the sample arguments are
        detached copies: warm-up and capture change no parameter and no gradient)."""
        torch.cuda.synchronize()              # the steps queued so far are not the capture's
        start = time.perf_counter()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        samples = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
        graphed = torch.cuda.make_graphed_callables(
            LoopModule(self.decoder, layout), samples, num_warmup_iters=self.warmup,
            allow_unused_input=True, pool=self.pool)
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
