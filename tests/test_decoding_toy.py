"""Toy models implementing the decoder interface of docs/contracts.md, for the decoding tests.

* :class:`ScriptedModel`: next-word log-probabilities read from a table keyed by the prefix, so
  a test can replay the notes' worked beam-search example exactly.
* :class:`TinyAttentionModel`: a small random GRU encoder-decoder with dot attention, padding
  mask and no cached state, so batch-size invariance is tested on a real network too.

The other decoding test files import these (``from test_decoding_toy import ...``); the tests
at the bottom check the toys themselves.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch
from torch import nn

from rnnsearch.data.vocab import BOS_ID, EOS_ID, SPECIALS


class ToyMemory(NamedTuple):
    keys: torch.Tensor      # batch x S x H (zeros for the scripted model)
    mask: torch.Tensor      # batch x S (True at real positions)
    src: torch.Tensor       # batch x S


class ScriptedState(NamedTuple):
    prefix: torch.Tensor    # batch x t: words produced so far (BOS excluded)


class ScriptedModel(nn.Module):
    """Log-probabilities scripted per prefix: ``table[("he", "hit")] = {"me": -0.8, ...}``.

    Words not listed share the remaining probability mass equally; after an unlisted prefix
    every word is equally likely. Attention is one-hot on source position ``t mod src_len``.
    """

    def __init__(self, words: list[str], table: dict[tuple[str, ...], dict[str, float]]):
        super().__init__()
        self.words = list(SPECIALS) + words
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.table = {tuple(self.ids[w] for w in prefix): {self.ids[w]: lp for w, lp in row.items()}
                      for prefix, row in table.items()}

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> ToyMemory:
        mask = torch.arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)
        return ToyMemory(torch.zeros(*src.shape, 1), mask, src)

    def init_state(self, memory: ToyMemory) -> ScriptedState:
        return ScriptedState(torch.empty(memory.src.size(0), 0, dtype=torch.long))

    def step(self, prev: torch.Tensor, state: ScriptedState, memory: ToyMemory):
        prefix = state.prefix
        if not bool((prev == BOS_ID).all()):
            prefix = torch.cat([prefix, prev.unsqueeze(1)], dim=1)
        logits = torch.stack([self._row(tuple(p.tolist())) for p in prefix])
        lengths = memory.mask.sum(1)
        attn = nn.functional.one_hot(prefix.size(1) % lengths, memory.src.size(1)).float()
        return logits, ScriptedState(prefix), attn

    def _row(self, prefix: tuple[int, ...]) -> torch.Tensor:
        listed = self.table.get(prefix, {})
        rest = 1.0 - sum(math.exp(lp) for lp in listed.values())
        assert rest > 0, f"scripted probabilities after {prefix} sum to more than 1"
        others = len(self.words) - len(listed)
        row = torch.full((len(self.words),), math.log(rest / others))
        for word, lp in listed.items():
            row[word] = lp
        return row

    def ids_of(self, sentence: str) -> tuple[int, ...]:
        return tuple(self.ids[w] for w in sentence.split())

    def text(self, tokens: tuple[int, ...]) -> str:
        return " ".join(self.words[t] for t in tokens if t != EOS_ID)


class TinyState(NamedTuple):
    hidden: torch.Tensor    # batch x H


class TinyAttentionModel(nn.Module):
    """GRU encoder, GRU-cell decoder, dot attention with a padding mask; random weights."""

    def __init__(self, vocab: int = 30, hidden: int = 16, seed: int = 0, attention: bool = True):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.cell = nn.GRUCell(2 * hidden, hidden)
        self.out = nn.Linear(2 * hidden, vocab)
        self.attention = attention
        self.double()

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> ToyMemory:
        mask = torch.arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)
        keys, _ = self.encoder(self.embed(src))          # padding comes after: no leak back
        return ToyMemory(keys * mask.unsqueeze(-1), mask, src)

    def init_state(self, memory: ToyMemory) -> TinyState:
        count = memory.mask.sum(1, keepdim=True).clamp(min=1)
        return TinyState(torch.tanh(memory.keys.sum(1) / count))

    def step(self, prev: torch.Tensor, state: TinyState, memory: ToyMemory):
        scores = torch.einsum("bh,bsh->bs", state.hidden, memory.keys)
        attn = torch.softmax(scores.masked_fill(~memory.mask, -torch.inf), dim=-1)  # batch x S
        context = torch.einsum("bs,bsh->bh", attn, memory.keys)
        if not self.attention:
            context = torch.zeros_like(context)
        hidden = self.cell(torch.cat([self.embed(prev), context], -1), state.hidden)
        logits = self.out(torch.cat([hidden, context], -1))
        return logits, TinyState(hidden), attn if self.attention else None


def test_scripted_model_reproduces_its_table():
    model = ScriptedModel(["he", "hit"], {(): {"he": -0.7}, ("he",): {"hit": -1.0}})
    src, src_len = torch.tensor([[4, 5]]), torch.tensor([2])
    memory = model.encode(src, src_len)
    logits, state, _ = model.step(torch.tensor([BOS_ID]), model.init_state(memory), memory)
    assert torch.log_softmax(logits, -1)[0, 4].item() == pytest.approx(-0.7, abs=1e-5)
    logits, _, attn = model.step(torch.tensor([4]), state, memory)
    assert torch.log_softmax(logits, -1)[0, 5].item() == pytest.approx(-1.0, abs=1e-5)
    assert attn.sum().item() == 1.0


def test_tiny_model_attention_ignores_padding():
    model = TinyAttentionModel()
    src, src_len = torch.tensor([[5, 6, 0, 0]]), torch.tensor([2])
    memory = model.encode(src, src_len)
    _, _, attn = model.step(torch.tensor([BOS_ID]), model.init_state(memory), memory)
    assert attn[0, 2:].sum().item() == 0.0
    assert abs(attn.sum().item() - 1.0) < 1e-9

