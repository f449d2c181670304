"""Decoders: one recurrent core (``embedding`` -> ``rnn`` -> ``output``) in three wirings.

*When* the decoder attends changes the recurrence, hence subclasses, not switches:
:class:`BahdanauDecoder` attends then updates, :class:`ConditionalDecoder` is Nematus's conditional
GRU, :class:`LuongDecoder` updates then attends. Submodules are named as the pretrained LM's, so
:func:`rnnsearch.models.lm_transfer.load_lm_into_decoder` copies by name.

Teacher forcing runs the fused ``nn.GRU`` when no input depends on the previous step, else a loop
over :func:`cell_step`, word projection and output layer batched outside it, steps read via
``unbind`` (``[:, t]`` would make a zero-filled batch x T x G*H gradient per step). ``step`` runs
the same code, so decoding reproduces the teacher-forced logits."""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.models.attention import Attention
from rnnsearch.models.rnn import cell_step, layer_weights, make_rnn
from rnnsearch.models.state import DecoderState, Memory

Layers = list[Tensor]  # one batch x H tensor per layer
# (word_gates batch x T x G*H, memory, state) -> what the decoder's attention_loop returns
LoopRunner = Callable[[Tensor, Memory, DecoderState], tuple[Tensor, ...]]


class StepWeights(NamedTuple):
    extra: Tensor | None        # (gates*H) x X: first-layer input weights of the non-word inputs
    layers: list[tuple[Tensor, Tensor, Tensor, Tensor]]  # (w_ih, b_ih, w_hh, b_hh) per layer
    # the conditional GRU's second update (w_ih, b_ih, w_hh, b_hh), reading the context
    transition: tuple[Tensor, Tensor, Tensor, Tensor] | None = None


class RecurrentDecoder(nn.Module):
    """The shared core: embedding, a stepped RNN, the bridge from the encoder and the output."""

    def __init__(self, vocab_size: int, config: ModelConfig, extra_size: int, summary_size: int,
                 output_in: int) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=PAD_ID)
        self.rnn = make_rnn(config.cell, config.embedding_size + extra_size, config.hidden_size,
                            config.decoder_layers, dropout=config.dropout)
        self.bridge = nn.Linear(summary_size, config.decoder_layers * config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(output_in, vocab_size)
        # runs instead of ``attention_loop`` (rnnsearch.training.graphs: CUDA graphs); None: eager
        self.loop_runner: LoopRunner | None = None

    def recurrent_modules(self) -> list[nn.RNNBase]:
        """The recurrent modules whose matrices ``orthogonal_init`` initialises."""
        return [self.rnn]

    def init_state(self, memory: Memory) -> DecoderState:
        """``s_0 = tanh(W_s summary)`` per layer (LSTM cells, feed: zero); summary: ``[h_fwd_N;
        h_bwd_1]`` if bidirectional (Bahdanau: ``h_bwd_1``; one rule is simpler), encdec: ``c``."""
        batch = memory.summary.size(0)
        hidden = torch.tanh(self.bridge(memory.summary))
        hidden = hidden.view(batch, self.config.decoder_layers, self.config.hidden_size)
        cell = torch.zeros_like(hidden) if self.config.cell == "lstm" else None
        feed = self._initial_feed(hidden)
        step = torch.zeros(batch, dtype=torch.long, device=hidden.device)
        return DecoderState(hidden, cell, feed, step)

    def _initial_feed(self, hidden: Tensor) -> Tensor | None:
        return None

    def _outputs(self, readout: Tensor, features: bool) -> Tensor:
        """Logits (... x V); ``features``: ``readout`` itself (... x O), for a fused-output loss."""
        return readout if features else self.output(readout)

    def _embed(self, words: Tensor) -> tuple[Tensor, Tensor]:
        """Embeddings (... x E) and their part of the first layer's input projection (... x G*H)."""
        embedded = self.dropout(self.embedding(words))
        w_ih, b_ih, _, _ = layer_weights(self.rnn, 0)
        return embedded, F.linear(embedded, w_ih[:, : self.config.embedding_size], b_ih)

    def _run_fused(self, inputs: Tensor, state: DecoderState) -> Tensor:
        """Teacher forcing through the fused ``rnn``: batch x T x in -> batch x T x H (top layer)."""
        hx = state.hidden.transpose(0, 1).contiguous()                   # layers x batch x H
        if state.cell is not None:
            hx = (hx, state.cell.transpose(0, 1).contiguous())
        outputs, _ = self.rnn(inputs, hx)
        return outputs

    def _attention_memory(self, values: Tensor, final: Tensor, mask: Tensor, lengths: Tensor
                          ) -> Memory:
        """Annotations ``values`` (batch x src_len x D) and keys ``U h_j`` (batch x src_len x K),
        cast under autocast once per batch, not at every target word's attention."""
        keys = self.attention.project_keys(values)
        return Memory(_cast_as_autocast(values), _cast_as_autocast(keys), mask, lengths, final)

    def _step_weights(self) -> StepWeights:
        """A step's weights, sliced and autocast once per sequence: per step, a slice would add a
        full-size gradient and a cast would repeat (autocast caches casts of parameters only)."""
        w_ih = self.rnn.weight_ih_l0
        words = self.config.embedding_size
        extra = _cast_as_autocast(w_ih[:, words:], contiguous=True) if w_ih.size(1) > words else None
        layers = [layer_weights(self.rnn, k) for k in range(self.config.decoder_layers)]
        return StepWeights(extra, layers)

    def _advance(self, weights: StepWeights, word_gates: Tensor, extra: Tensor | None,
                 hidden: Layers, cells: Layers | list[None]) -> tuple[Layers, Layers | list[None]]:
        """One recurrent step of every layer; ``extra`` (batch x X) is the rest of the input."""
        gates = word_gates
        if extra is not None:
            gates = gates + F.linear(extra, weights.extra)
        new_hidden, new_cells = [], []
        for layer, (w_ih, b_ih, w_hh, b_hh) in enumerate(weights.layers):
            if layer > 0:
                below = F.dropout(new_hidden[-1], self.config.dropout, self.training)
                gates = F.linear(below, w_ih, b_ih)
            h, c = cell_step(self.config.cell, gates, hidden[layer], cells[layer], w_hh, b_hh)
            new_hidden.append(h)
            new_cells.append(c)
        return new_hidden, new_cells


def _cast_as_autocast(tensor: Tensor, contiguous: bool = False) -> Tensor:
    """``tensor`` in the autocast dtype if autocast is on (one cast the loop shares, not one per
    use); ``contiguous``: a contiguous copy either way."""
    device = tensor.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    layout = torch.contiguous_format if contiguous else torch.preserve_format
    return tensor.to(dtype=dtype, memory_format=layout)


def _positions(state: DecoderState, length: int) -> Tensor:
    """Target positions ``step .. step + length - 1`` of every sentence: batch x length."""
    return state.step.unsqueeze(1) + torch.arange(length, device=state.step.device)


def split_state(state: DecoderState) -> tuple[Layers, Layers | list[None]]:
    """Per-layer lists of batch x H tensors from a batch x layers x H state."""
    hidden = list(state.hidden.unbind(1))
    cells = list(state.cell.unbind(1)) if state.cell is not None else [None] * len(hidden)
    return hidden, cells


def join_state(hidden: Layers, cells: Layers | list[None], feed: Tensor | None,
               step: Tensor) -> DecoderState:
    cell = torch.stack(cells, 1) if cells[0] is not None else None
    return DecoderState(torch.stack(hidden, 1), cell, feed, step)


class BahdanauDecoder(RecurrentDecoder):
    """RNNsearch (with attention) and RNNencdec (``attention=None``, Cho's conditioned decoder)."""

    reads_context = True  # the recurrent update reads [y_{i-1}; c_i] (else y_{i-1} alone)

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        annotations, hidden = config.encoder_output_size, config.hidden_size
        attend = config.architecture.attention
        context = annotations if attend else hidden
        super().__init__(vocab_size, config, extra_size=context if self.reads_context else 0,
                         summary_size=annotations if attend else hidden,
                         output_in=config.output_size)
        self.attention = (Attention(config.score, hidden, annotations, config.attention_size)
                          if attend else None)
        self.summarize = None if attend else nn.Linear(annotations, hidden)  # c = tanh(V h_N)
        pieces = 2 if config.maxout else 1
        self.deep = nn.Linear(hidden + config.embedding_size + context, config.output_size * pieces)

    def prepare_memory(self, values: Tensor, final: Tensor, mask: Tensor, lengths: Tensor) -> Memory:
        """Precompute ``U h_j`` (search) or the fixed context ``c`` (encdec) once per batch."""
        if self.attention is None:
            return Memory(values, None, mask, lengths, torch.tanh(self.summarize(final)))
        return self._attention_memory(values, final, mask, lengths)

    def step(self, prev: Tensor, state: DecoderState, memory: Memory
             ) -> tuple[Tensor, DecoderState, Tensor | None]:
        embedded, word_gates = self._embed(prev)                          # batch x E, batch x G*H
        recurrent = self._step_weights()
        hidden, cells = split_state(state)
        hidden, cells, context, weights = self._update(recurrent, word_gates, hidden, cells, memory)
        logits = self.output(self._readout(hidden[-1], embedded, context))  # batch x V
        return logits, join_state(hidden, cells, None, state.step + 1), weights

    def forward(self, tgt_in: Tensor, memory: Memory, state: DecoderState, features: bool = False
                ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: batch x T ids -> logits batch x T x V (``features``: the output
        layer's input, batch x T x O, instead), weights batch x T x S."""
        if self.attention is None:
            embedded = self.dropout(self.embedding(tgt_in))               # batch x T x E
            context = memory.summary.unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # batch x T x H
            states = self._run_fused(torch.cat([embedded, context], -1), state)
            return self._outputs(self._readout(states, embedded, context), features), None
        embedded, word_gates = self._embed(tgt_in)                        # batch x T x E / G*H
        run = self.loop_runner or self.attention_loop
        states, contexts, alignments = run(word_gates, memory, state)
        return self._outputs(self._readout(states, embedded, contexts), features), alignments

    def attention_loop(self, word_gates: Tensor, memory: Memory, state: DecoderState
                       ) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher forcing, a position at a time: word part of the input projection (batch x T x
        G*H) -> top-layer states batch x T x H, contexts batch x T x C, weights batch x T x S."""
        recurrent = self._step_weights()
        hidden, cells = split_state(state)
        tops, contexts, alignments = [], [], []
        for gates_t in word_gates.unbind(1):  # one step's batch x G*H
            hidden, cells, context, weights = self._update(recurrent, gates_t, hidden, cells, memory)
            tops.append(hidden[-1])
            contexts.append(context)
            alignments.append(weights)
        return torch.stack(tops, 1), torch.stack(contexts, 1), torch.stack(alignments, 1)

    def _update(self, recurrent: StepWeights, word_gates: Tensor, hidden: Layers,
                cells: Layers | list[None], memory: Memory
                ) -> tuple[Layers, Layers | list[None], Tensor, Tensor | None]:
        """One target position: ``c_i`` from ``s_{i-1}``, then ``s_i`` from ``[y_{i-1}; c_i]``.
        Returns the new layers, ``c_i`` (batch x C) and the weights (batch x S)."""
        context, weights = self._context(hidden[-1], memory)
        hidden, cells = self._advance(recurrent, word_gates, context, hidden, cells)
        return hidden, cells, context, weights

    def _context(self, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor | None]:
        """``c_i`` from ``s_{i-1}`` (batch x H): batch x C and weights batch x S."""
        if self.attention is None:
            return memory.summary, None
        context, weights = self.attention(query.unsqueeze(1), memory.keys, memory.values,
                                          memory.mask, memory.lengths)
        return context.squeeze(1), weights.squeeze(1)

    def _readout(self, state: Tensor, embedded: Tensor, context: Tensor) -> Tensor:
        """``output``'s input: deep output ``t = f(U s_i + V E y_{i-1} + C c_i)``, f maxout/tanh."""
        pre = self.deep(torch.cat([state, embedded, context], -1))
        if self.config.maxout:
            pre = pre.unflatten(-1, (self.config.output_size, 2)).amax(-1)
        else:
            pre = torch.tanh(pre)
        return self.dropout(pre)


class ConditionalDecoder(BahdanauDecoder):
    """RNNsearch with Nematus's conditional GRU: update with ``y_{i-1}``, attend, update with
    ``c_i``. ``rnn`` reads the word alone (an LM's ``rnn`` fits it whole); ``transition`` (one
    layer, same cell) reads ``c_i`` into the top layer's state."""

    reads_context = False

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__(vocab_size, config)
        self.transition = make_rnn(config.cell, config.encoder_output_size, config.hidden_size)

    def recurrent_modules(self) -> list[nn.RNNBase]:
        return [self.rnn, self.transition]

    def _step_weights(self) -> StepWeights:
        return super()._step_weights()._replace(transition=layer_weights(self.transition, 0))

    def _update(self, recurrent: StepWeights, word_gates: Tensor, hidden: Layers,
                cells: Layers | list[None], memory: Memory
                ) -> tuple[Layers, Layers | list[None], Tensor, Tensor]:
        """``s'_i`` from ``y_{i-1}`` (every layer), ``c_i`` from the top ``s'_i``, then the top
        layer's ``s_i = transition(s'_i, c_i)``."""
        hidden, cells = self._advance(recurrent, word_gates, None, hidden, cells)
        context, weights = self._context(hidden[-1], memory)              # batch x C, batch x S
        w_ih, b_ih, w_hh, b_hh = recurrent.transition
        top, top_cell = cell_step(self.config.cell, F.linear(context, w_ih, b_ih), hidden[-1],
                                  cells[-1], w_hh, b_hh)
        return hidden[:-1] + [top], cells[:-1] + [top_cell], context, weights


class LuongDecoder(RecurrentDecoder):
    """Luong et al. 2015: global or local attention after the update, optional input feeding."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        annotations, hidden = config.encoder_output_size, config.hidden_size
        super().__init__(vocab_size, config, extra_size=hidden if config.input_feeding else 0,
                         summary_size=annotations, output_in=hidden)
        self.attention = Attention(config.score, hidden, annotations, config.attention_size,
                                   config.attention, config.window)
        self.combine = nn.Linear(annotations + hidden, hidden, bias=False)  # W_c

    def prepare_memory(self, values: Tensor, final: Tensor, mask: Tensor, lengths: Tensor) -> Memory:
        return self._attention_memory(values, final, mask, lengths)

    def _initial_feed(self, hidden: Tensor) -> Tensor | None:
        if not self.config.input_feeding:
            return None
        return hidden.new_zeros(hidden.size(0), self.config.hidden_size)

    def step(self, prev: Tensor, state: DecoderState, memory: Memory
             ) -> tuple[Tensor, DecoderState, Tensor]:
        _, word_gates = self._embed(prev)
        recurrent = self._step_weights()
        hidden, cells = split_state(state)
        hidden, cells = self._advance(recurrent, word_gates, state.feed, hidden, cells)
        attentional, weights = self._attend(hidden[-1].unsqueeze(1), memory, state.step.unsqueeze(1))
        attentional, weights = attentional.squeeze(1), weights.squeeze(1)  # batch x H, batch x S
        feed = attentional if self.config.input_feeding else None
        logits = self.output(self.dropout(attentional))                   # batch x V
        return logits, join_state(hidden, cells, feed, state.step + 1), weights

    def forward(self, tgt_in: Tensor, memory: Memory, state: DecoderState, features: bool = False
                ) -> tuple[Tensor, Tensor]:
        """Teacher forcing: batch x T ids -> logits batch x T x V (``features``: the output
        layer's input, batch x T x H, instead), weights batch x T x S."""
        if not self.config.input_feeding:
            steps = _positions(state, tgt_in.size(1))
            embedded = self.dropout(self.embedding(tgt_in))               # batch x T x E
            attentional, weights = self._attend(self._run_fused(embedded, state), memory, steps)
            return self._outputs(self.dropout(attentional), features), weights
        _, word_gates = self._embed(tgt_in)                               # batch x T x G*H
        run = self.loop_runner or self.attention_loop
        attentional, alignments = run(word_gates, memory, state)
        return self._outputs(self.dropout(attentional), features), alignments

    def attention_loop(self, word_gates: Tensor, memory: Memory, state: DecoderState
                       ) -> tuple[Tensor, Tensor]:
        """Input feeding, a position at a time: word part of the input projection (batch x T x
        G*H) -> attentional states batch x T x H, weights batch x T x S."""
        steps = _positions(state, word_gates.size(1))
        recurrent = self._step_weights()
        hidden, cells = split_state(state)
        feed, outputs, alignments = state.feed, [], []
        for gates_t, steps_t in zip(word_gates.unbind(1), steps.unbind(1)):
            hidden, cells = self._advance(recurrent, gates_t, feed, hidden, cells)
            attentional, weights = self._attend(hidden[-1].unsqueeze(1), memory, steps_t.unsqueeze(1))
            feed = attentional.squeeze(1)
            outputs.append(feed)
            alignments.append(weights.squeeze(1))
        return torch.stack(outputs, 1), torch.stack(alignments, 1)

    def _attend(self, queries: Tensor, memory: Memory, steps: Tensor) -> tuple[Tensor, Tensor]:
        """``h~_t = tanh(W_c [c_t; h_t])`` for queries batch x T x H; weights batch x T x S."""
        context, weights = self.attention(queries, memory.keys, memory.values, memory.mask,
                                          memory.lengths, steps)
        return torch.tanh(self.combine(torch.cat([context, queries], -1))), weights
