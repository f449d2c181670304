"""The Transformer encoder-decoder (Vaswani et al. 2017) behind the recurrent models' interface.

Pre-norm layers (no warmup needed at the other models' Adam settings), sinusoidal positions,
d = ``embedding_size`` throughout (pretrained word vectors fit). Attention is written out, not
``nn.MultiheadAttention``, so training, decoding steps and padding masks share the arithmetic and
each head's weights come back. Keys and values are stored as the products read them (keys
transposed, heads split, contiguous): the source's once per batch (:class:`TransformerMemory`),
decoded positions' in buffers a step appends to in place (:class:`TransformerState`), so a step
copies no key or value. Model attention: ``alignment_layer``'s cross-attention, head-averaged."""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import PAD_ID

FIRST_CAPACITY = 16     # decoded positions a new cache holds; a full one doubles


class TransformerMemory(NamedTuple):
    """The encoded source as the decoder reads it, computed once per batch."""

    cross_keys: tuple[Tensor, ...]  # per decoder layer: batch x heads x dh x S, keys transposed
    cross_values: tuple[Tensor, ...]    # per decoder layer: batch x heads x S x dh
    mask: Tensor                    # batch x S, bool, True on real words
    lengths: Tensor                 # batch, long: real source lengths

    def reordered(self, index: Tensor) -> TransformerMemory:
        """Rows ``index`` of every tensor, each layer's too."""
        return TransformerMemory(*(tuple(t.index_select(0, index) for t in field)
                                   if isinstance(field, tuple) else field.index_select(0, index)
                                   for field in self))


class TransformerState(NamedTuple):
    """Each layer's self-attention keys and values of the ``length`` decoded positions, at the front
    of buffers with room for more. A step appends in place unless another state was stepped from the
    same buffers (``written``, shared by their states, says how far they are written), else copies
    first: stepping a state twice (exhaustive search) is safe, one step per state copies nothing."""

    keys: tuple[Tensor, ...]        # per layer: batch x heads x dh x capacity, keys transposed
    values: tuple[Tensor, ...]      # per layer: batch x heads x capacity x dh
    length: int                     # decoded positions: [..., :length] of the buffers
    written: list[int]              # one shared entry: positions written into these buffers

    def reordered(self, index: Tensor) -> TransformerState:
        """Rows ``index`` (:func:`rnnsearch.decoding.steps.select_rows`) in new buffers with room
        for only the next step, so its products read whole buffers (beams reorder every step)."""
        size = self.length + 1
        keys = tuple(_moved(k, self.length, size, -1, index) for k in self.keys)
        values = tuple(_moved(v, self.length, size, -2, index) for v in self.values)
        return TransformerState(keys, values, self.length, [self.length])

    def with_room(self) -> TransformerState:
        """This state, on buffers a step may write position ``length`` of."""
        capacity = self.values[0].size(2)
        if self.written[0] == self.length < capacity:
            self.written[0] += 1
            return self
        grown = max(2 * capacity, FIRST_CAPACITY) if self.length == capacity else capacity
        keys = tuple(_moved(k, self.length, grown, -1) for k in self.keys)
        values = tuple(_moved(v, self.length, grown, -2) for v in self.values)
        return TransformerState(keys, values, self.length, [self.length + 1])


def _moved(buffer: Tensor, length: int, capacity: int, axis: int,
           rows: Tensor | None = None) -> Tensor:
    """``buffer``'s first ``length`` positions along ``axis`` (of its rows ``rows``, default
    all) at the front of a new buffer of ``capacity`` positions."""
    shape = list(buffer.shape)
    shape[axis] = capacity
    if rows is not None:
        shape[0] = rows.numel()
    moved = buffer.new_empty(shape)
    front, into = buffer.narrow(axis, 0, length), moved.narrow(axis, 0, length)
    if rows is None:
        into.copy_(front)
    elif buffer.requires_grad:           # autograd takes no out=: gather, then copy
        into.copy_(front.index_select(0, rows))
    else:
        torch.index_select(front, 0, rows, out=into)
    return moved


def sinusoids(positions: Tensor, size: int) -> Tensor:
    """Vaswani et al.'s position encodings: positions (any shape, long) -> ... x size."""
    rates = torch.exp(torch.arange(0, size, 2, device=positions.device, dtype=torch.float32)
                      * (-math.log(10000.0) / size))                       # size/2
    angles = positions.unsqueeze(-1).float() * rates                     # ... x size/2
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)[..., :size]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over ``heads`` heads of ``size / heads`` dimensions."""

    def __init__(self, size: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(size, size)
        self.key_value = nn.Linear(size, 2 * size)
        self.out = nn.Linear(size, size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries: Tensor, allowed: Tensor, keys: Tensor) -> tuple[Tensor, Tensor]:
        """``queries`` batch x Tq x d attend to ``keys`` batch x Tk x d where ``allowed``
        (batch x Tq x Tk or batch x 1 x Tk, bool) lets them: :meth:`attend`."""
        return self.attend(queries, allowed, *self.heads_of(self.key_value(keys)))

    def heads_of(self, projected: Tensor) -> tuple[Tensor, Tensor]:
        """``key_value`` output batch x Tk x 2d -> contiguous keys batch x heads x dh x Tk
        (transposed) and values batch x heads x Tk x dh, the layout the products read."""
        batch, _, double = projected.shape
        split = (batch, -1, self.heads, double // (2 * self.heads))
        keys, values = (part.reshape(split).transpose(1, 2) for part in projected.chunk(2, -1))
        return keys.transpose(-1, -2).contiguous(), values.contiguous()

    def attend(self, queries: Tensor, allowed: Tensor | None, keys: Tensor, values: Tensor
               ) -> tuple[Tensor, Tensor]:
        """``queries`` batch x Tq x d over keys and values of :meth:`heads_of`'s layout (a
        view along Tk: the cache's front), where ``allowed`` lets them (None: every key).
        Returns batch x Tq x d and the weights batch x heads x Tq x Tk."""
        batch, length, size = queries.shape
        q = self.query(queries).view(batch, length, self.heads, -1).transpose(1, 2)  # b x h x Tq x dh
        scores = q @ keys / math.sqrt(size // self.heads)                   # batch x h x Tq x Tk
        if allowed is not None:
            scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
        weights = scores.softmax(-1)
        mixed = (self.dropout(weights) @ values).transpose(1, 2).reshape(batch, length, size)
        return self.out(mixed), weights


class FeedForward(nn.Sequential):
    """Position-wise ``W_2 relu(W_1 x)``."""

    def __init__(self, size: int, inner: int, dropout: float) -> None:
        super().__init__(nn.Linear(size, inner), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(inner, size))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward block, each pre-normed with a residual."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        size = config.embedding_size
        self.norm_self, self.norm_ff = nn.LayerNorm(size), nn.LayerNorm(size)
        self.self_attention = MultiHeadAttention(size, config.heads, config.dropout)
        self.feed_forward = FeedForward(size, config.feedforward_size, config.dropout)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, allowed: Tensor) -> Tensor:
        """x: batch x S x d; allowed: batch x 1 x S (the real words)."""
        normed = self.norm_self(x)
        x = x + self.dropout(self.self_attention(normed, allowed, normed)[0])
        return x + self.dropout(self.feed_forward(self.norm_ff(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the source and a feed-forward block."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        size = config.embedding_size
        self.norm_self, self.norm_cross, self.norm_ff = (nn.LayerNorm(size) for _ in range(3))
        self.self_attention = MultiHeadAttention(size, config.heads, config.dropout)
        self.cross_attention = MultiHeadAttention(size, config.heads, config.dropout)
        self.feed_forward = FeedForward(size, config.feedforward_size, config.dropout)
        self.dropout = nn.Dropout(config.dropout)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The self-attention's keys and values of positions x (batch x T x d), in
        :meth:`MultiHeadAttention.heads_of`'s layout."""
        attention = self.self_attention
        return attention.heads_of(attention.key_value(self.norm_self(x)))

    def forward(self, x: Tensor, past: tuple[Tensor, Tensor], causal: Tensor | None,
                source: tuple[Tensor, Tensor], mask: Tensor) -> tuple[Tensor, Tensor]:
        """x (batch x T x d) attends over ``past`` (:meth:`project` of this layer's inputs, x's own
        included) where ``causal`` (T x P; None: all) allows, then over ``source`` where ``mask``
        (batch x S) allows; returns batch x T x d, cross-attention weights batch x heads x T x S."""
        allowed = None if causal is None else causal.unsqueeze(0)
        x = x + self.dropout(self.self_attention.attend(self.norm_self(x), allowed, *past)[0])
        attended, weights = self.cross_attention.attend(self.norm_cross(x), mask.unsqueeze(1),
                                                        *source)
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.norm_ff(x))), weights


class Embedder(nn.Module):
    """Word embeddings scaled by ``sqrt(d)`` plus sinusoidal positions, then dropout."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=PAD_ID)
        self.scale = math.sqrt(config.embedding_size)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, words: Tensor, positions: Tensor) -> Tensor:
        """words, positions: ... (long) -> ... x d."""
        vectors = self.embedding(words) * self.scale
        return self.dropout(vectors + sinusoids(positions, vectors.size(-1)).to(vectors.dtype))


class TransformerEncoder(nn.Module):
    """Source ids -> outputs, their mean over the real words, the mask and the lengths (the
    recurrent :class:`~rnnsearch.models.encoder.Encoder`'s return)."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__()
        self.embed = Embedder(vocab_size, config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.norm = nn.LayerNorm(config.embedding_size)
        self.output_size = config.embedding_size

    @property
    def embedding(self) -> nn.Embedding:
        """The source word vectors (what ``train.init.embeddings`` fills)."""
        return self.embed.embedding

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """src: batch x S ids, src_len: batch -> batch x S x d, batch x d, batch x S, batch."""
        lengths = src_len.clamp(min=1).to(src.device)
        positions = torch.arange(src.size(1), device=src.device)                 # S
        mask = positions.unsqueeze(0) < lengths.unsqueeze(1)                      # batch x S
        x = self.embed(src, positions.expand_as(src))
        for layer in self.layers:
            x = layer(x, mask.unsqueeze(1))
        values = self.norm(x)                                                     # batch x S x d
        real = mask.unsqueeze(-1).to(values.dtype)
        summary = (values * real).sum(1) / lengths.unsqueeze(1).to(values.dtype)  # batch x d
        return values, summary, mask, lengths


class TransformerDecoder(nn.Module):
    """Target ids -> logits through ``decoder_layers`` layers; stepwise with a cache of each
    layer's inputs, or all positions at once under a causal mask (teacher forcing)."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = Embedder(vocab_size, config)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(config.embedding_size)
        self.output = nn.Linear(config.embedding_size, vocab_size)
        self.dropout = nn.Dropout(config.dropout)
        self.aligned = config.alignment_layer % config.decoder_layers    # its index, from 0
        self.loop_runner = None        # no teacher-forcing loop to replace (CUDA graphs: none)

    @property
    def embedding(self) -> nn.Embedding:
        """The target word vectors (what ``train.init.embeddings`` fills)."""
        return self.embed.embedding

    @property
    def attention(self) -> MultiHeadAttention:
        """The cross-attention whose head average is the model's attention."""
        return self.layers[self.aligned].cross_attention

    def read_attention_from(self, layer: int) -> None:
        """Use layer ``layer``'s cross-attention (from 0; < 0: from the last) as the model's, e.g.
        to score each layer's alignments; training and supervision use ``alignment_layer``'s."""
        if not -len(self.layers) <= layer < len(self.layers):
            raise ValueError(f"layer {layer}: the decoder has {len(self.layers)} layers "
                             f"(0 to {len(self.layers) - 1}, or -1 for the last)")
        self.aligned = layer % len(self.layers)

    def prepare_memory(self, values: Tensor, final: Tensor, mask: Tensor, lengths: Tensor
                       ) -> TransformerMemory:
        """Every layer's cross-attention keys and values of the source, once per batch."""
        heads = [layer.cross_attention.heads_of(layer.cross_attention.key_value(values))
                 for layer in self.layers]
        keys, cross_values = zip(*heads)
        return TransformerMemory(keys, cross_values, mask, lengths)

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        """An empty cache: no target position decoded yet."""
        batch, heads = memory.mask.size(0), self.config.heads
        width = self.config.embedding_size // heads
        new = memory.cross_values[0].new_empty
        return TransformerState(
            tuple(new(batch, heads, width, FIRST_CAPACITY) for _ in self.layers),
            tuple(new(batch, heads, FIRST_CAPACITY, width) for _ in self.layers), 0, [0])

    def step(self, prev: Tensor, state: TransformerState, memory: TransformerMemory
             ) -> tuple[Tensor, TransformerState, Tensor]:
        """prev: batch ids -> logits batch x V, the state with this position's keys and values
        appended, the attention batch x S."""
        state = state.with_room()
        t = state.length
        x = self.embed(prev, torch.full_like(prev, t)).unsqueeze(1)          # batch x 1 x d
        weights = None
        for index, layer in enumerate(self.layers):
            keys, values = layer.project(x)            # batch x h x dh x 1, batch x h x 1 x dh
            state.keys[index][..., t:t + 1] = keys
            state.values[index][:, :, t:t + 1] = values
            past = state.keys[index][..., :t + 1], state.values[index][:, :, :t + 1]
            x, cross = layer(x, past, None, self._source(memory, index), memory.mask)
            weights = cross if index == self.aligned else weights
        logits = self.output(self.dropout(self.norm(x.squeeze(1))))
        return logits, state._replace(length=t + 1), weights.mean(1).squeeze(1)

    def forward(self, tgt_in: Tensor, memory: TransformerMemory, state: TransformerState,
                features: bool = False) -> tuple[Tensor, Tensor]:
        """Teacher forcing: batch x T ids -> logits batch x T x V (``features``: the output
        layer's input, batch x T x d), attention batch x T x S."""
        length = tgt_in.size(1)
        positions = torch.arange(length, device=tgt_in.device)
        causal = positions.unsqueeze(1) >= positions.unsqueeze(0)                # T x T
        x = self.embed(tgt_in, positions.expand_as(tgt_in))
        weights = None
        for index, layer in enumerate(self.layers):
            x, cross = layer(x, layer.project(x), causal, self._source(memory, index),
                             memory.mask)
            weights = cross if index == self.aligned else weights
        readout = self.dropout(self.norm(x))
        return (readout if features else self.output(readout)), weights.mean(1)

    @staticmethod
    def _source(memory: TransformerMemory, index: int) -> tuple[Tensor, Tensor]:
        """Layer ``index``'s cross-attention keys and values."""
        return memory.cross_keys[index], memory.cross_values[index]
