"""The Transformer encoder-decoder (Vaswani et al. 2017) behind the recurrent models' interface.

Pre-norm layers (no warmup needed at the other models' Adam settings), sinusoidal positions,
d = ``embedding_size`` throughout (pretrained word vectors fit). Attention is written out, not
``nn.MultiheadAttention``, so training, a decoding step and the padding mask run the same
arithmetic and return each head's weights. :class:`TransformerState` caches each layer's
self-attention keys and values. The model's attention: layer ``alignment_layer``'s
cross-attention, head-averaged."""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import PAD_ID


class TransformerMemory(NamedTuple):
    """The encoded source, computed once per batch."""

    values: Tensor          # batch x src_len x d: the encoder's outputs
    cross: Tensor           # batch x src_len x layers*2d: each decoder layer's cross keys, values
    mask: Tensor            # batch x src_len, bool, True on real words
    lengths: Tensor         # batch, long: real source lengths
    summary: Tensor         # batch x d: the outputs' mean over the real words


class TransformerState(NamedTuple):
    """Between decoding steps: what the decoded target positions left."""

    cache: Tensor           # batch x layers x t x 2d: each layer's self-attention keys, values
    step: Tensor            # batch, long: index t of the next target word


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

    def forward(self, queries: Tensor, allowed: Tensor, keys: Tensor | None = None,
                projected: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``queries`` batch x Tq x d attend to ``keys`` (batch x Tk x d) or to their
        ``key_value`` projection (``projected``, batch x Tk x 2d); ``allowed`` (batch x Tq x Tk
        or batch x 1 x Tk, bool) says which keys each query sees. Returns batch x Tq x d and
        the weights batch x heads x Tq x Tk."""
        batch, length, size = queries.shape
        if projected is None:
            projected = self.key_value(keys)
        split = (batch, -1, self.heads, size // self.heads)
        q = self.query(queries).view(split).transpose(1, 2)                 # batch x h x Tq x dh
        k, v = (part.reshape(split).transpose(1, 2) for part in projected.chunk(2, -1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size // self.heads)    # batch x h x Tq x Tk
        scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
        weights = scores.softmax(-1)
        mixed = (self.dropout(weights) @ v).transpose(1, 2).reshape(batch, length, size)
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

    def project(self, x: Tensor) -> Tensor:
        """The self-attention's keys and values of positions x: batch x T x d -> batch x T x 2d."""
        return self.self_attention.key_value(self.norm_self(x))

    def forward(self, x: Tensor, past: Tensor, causal: Tensor, source: Tensor,
                memory: TransformerMemory
                ) -> tuple[Tensor, Tensor]:
        """Queries x (batch x T x d) over ``past``, the projected keys and values (batch x P x
        2d, :meth:`project`) of this layer's inputs, x's own positions among them, where
        ``causal`` (T x P) allows, then over the source (``source``: this layer's projected
        keys and values, batch x S x 2d). Returns batch x T x d and the cross-attention's
        weights batch x heads x T x S."""
        x = x + self.dropout(self.self_attention(self.norm_self(x), causal.unsqueeze(0),
                                                 projected=past)[0])
        attended, weights = self.cross_attention(self.norm_cross(x), memory.mask.unsqueeze(1),
                                                 projected=source)
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
        """Return decoder layer ``layer``'s cross-attention (from 0; negative: from the last)
        as the model's attention from now on, e.g. to score each layer's alignments; training
        and supervision use ``alignment_layer``'s."""
        if not -len(self.layers) <= layer < len(self.layers):
            raise ValueError(f"layer {layer}: the decoder has {len(self.layers)} layers "
                             f"(0 to {len(self.layers) - 1}, or -1 for the last)")
        self.aligned = layer % len(self.layers)

    def prepare_memory(self, values: Tensor, final: Tensor, mask: Tensor, lengths: Tensor
                       ) -> TransformerMemory:
        """Project the source once per batch for every layer's cross-attention."""
        cross = torch.cat([layer.cross_attention.key_value(values) for layer in self.layers], -1)
        return TransformerMemory(values, cross, mask, lengths, final)  # cross: batch x S x L*2d

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        """An empty cache: no target position decoded yet."""
        batch, size = memory.values.size(0), self.config.embedding_size
        cache = memory.values.new_zeros(batch, len(self.layers), 0, 2 * size)  # batch x L x 0 x 2d
        return TransformerState(cache, torch.zeros(batch, dtype=torch.long, device=cache.device))

    def step(self, prev: Tensor, state: TransformerState, memory: TransformerMemory
             ) -> tuple[Tensor, TransformerState, Tensor]:
        """prev: batch ids -> logits batch x V, the state with this position's keys and values
        appended, the attention batch x S."""
        x = self.embed(prev, state.step).unsqueeze(1)                      # batch x 1 x d
        allowed = torch.ones(1, state.cache.size(2) + 1, dtype=torch.bool, device=x.device)
        projected, weights = [], None
        for index, layer in enumerate(self.layers):
            projected.append(layer.project(x))                            # batch x 1 x 2d
            past = torch.cat([state.cache[:, index], projected[-1]], 1)   # batch x (t+1) x 2d
            x, cross = layer(x, past, allowed, self._source(memory, index), memory)
            weights = cross if index == self.aligned else weights
        cache = torch.cat([state.cache, torch.stack(projected, 1)], 2)    # batch x L x (t+1) x 2d
        logits = self.output(self.dropout(self.norm(x.squeeze(1))))
        return logits, TransformerState(cache, state.step + 1), weights.mean(1).squeeze(1)

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
            x, cross = layer(x, layer.project(x), causal, self._source(memory, index), memory)
            weights = cross if index == self.aligned else weights
        readout = self.dropout(self.norm(x))
        return (readout if features else self.output(readout)), weights.mean(1)

    def _source(self, memory: TransformerMemory, index: int) -> Tensor:
        """Layer ``index``'s projected source keys and values: batch x S x 2d."""
        width = 2 * self.config.embedding_size
        return memory.cross[..., index * width:(index + 1) * width]
