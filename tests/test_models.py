"""Models: attention weights, padding invariance, step vs teacher forcing, save/load, config errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rnnsearch.errors import ConfigError
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.attention import Attention
from rnnsearch.models.seq2seq import build_model, load_model, save_model
from rnnsearch.models.state import DecoderState, Memory, reorder

SRC_V, TGT_V = 30, 40

VARIANTS = {
    "encdec": dict(model="encdec", bidirectional=False),
    "search": dict(model="search"),
    "search_maxout_lstm2": dict(model="search", maxout=True, cell="lstm", encoder_layers=2,
                                decoder_layers=2),
    "search_cond": dict(model="search_cond"),
    "search_cond_lstm2": dict(model="search_cond", cell="lstm", decoder_layers=2, maxout=True),
    "luong_dot": dict(model="luong", score="dot", bidirectional=False),
    "luong_general_nofeed": dict(model="luong", score="general", input_feeding=False),
    "luong_concat_lstm": dict(model="luong", score="concat", cell="lstm"),
    "luong_scaled_rnn": dict(model="luong", score="scaled_dot", bidirectional=False, cell="rnn"),
    "luong_local_m": dict(model="luong", score="general", attention="local_m", window=1),
    "luong_local_p": dict(model="luong", score="dot", bidirectional=False, attention="local_p",
                          window=1, decoder_layers=2),
}
ATTENTIVE = [name for name in VARIANTS if name != "encdec"]


def tiny(name: str, **extra) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(embedding_size=12, hidden_size=10, attention_size=8, output_size=10,
                         **{**VARIANTS[name], **extra})
    return build_model(config, SRC_V, TGT_V).eval()


def batch(pad_to: int = 0):
    """Three sources of lengths 6, 4, 2 (padded to 6 + pad_to) and targets of length 5."""
    gen = torch.Generator().manual_seed(1)
    lengths = torch.tensor([6, 4, 2])
    src = torch.randint(4, SRC_V, (3, 6 + pad_to), generator=gen)
    src[torch.arange(6 + pad_to).unsqueeze(0) >= lengths.unsqueeze(1)] = PAD_ID
    tgt = torch.randint(4, TGT_V, (3, 5), generator=gen)
    return src, lengths, tgt


@pytest.mark.parametrize("name", ATTENTIVE)
def test_attention_weights_are_a_distribution_over_real_words(name):
    src, lengths, tgt = batch(pad_to=3)
    _, attn = tiny(name)(src, lengths, tgt)                   # batch x T x S
    mask = (torch.arange(src.size(1)).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)
    assert (attn >= 0).all()
    assert torch.allclose(attn.sum(-1), torch.ones(3, 5), atol=1e-5)
    assert (attn.masked_select(~mask.expand_as(attn)) == 0).all()


@pytest.mark.parametrize("kind", ["local_m", "local_p"])
def test_local_attention_stays_in_its_window(kind):
    torch.manual_seed(0)
    attention = Attention("general", 6, 6, 5, kind=kind, window=2)
    values = torch.randn(2, 12, 6)
    lengths = torch.tensor([12, 9])
    mask = torch.arange(12).unsqueeze(0) < lengths.unsqueeze(1)
    steps = torch.arange(7).unsqueeze(0).expand(2, -1)
    query = torch.randn(2, 7, 6)
    _, weights = attention(query, attention.project_keys(values), values, mask, lengths, steps)
    for b in range(2):
        for t in range(7):
            nonzero = weights[b, t].nonzero().flatten()
            assert nonzero.max() - nonzero.min() <= 4      # inside [p - D, p + D]
            if kind == "local_m":
                assert ((nonzero - min(t, lengths[b] - 1)).abs() <= 2).all()
    assert torch.allclose(weights.sum(-1), torch.ones(2, 7), atol=1e-5)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_padding_changes_no_output(name):
    model = tiny(name)
    src, lengths, tgt = batch()
    logits, attn = model(src, lengths, tgt)
    src_padded, _, _ = batch(pad_to=4)
    src_padded[:, :6] = src
    tgt_padded = torch.cat([tgt, torch.full((3, 3), PAD_ID)], 1)
    logits_p, attn_p = model(src_padded, lengths, tgt_padded)
    assert torch.allclose(logits, logits_p[:, :5], atol=1e-5)
    if attn is not None:
        assert torch.allclose(attn, attn_p[:, :5, :6], atol=1e-6)
    # each sentence alone gives the same logits as inside the batch
    for b in range(3):
        alone, _ = model(src[b: b + 1, : lengths[b]], lengths[b: b + 1], tgt[b: b + 1])
        assert torch.allclose(alone, logits[b: b + 1], atol=1e-5)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_step_by_step_matches_teacher_forcing(name):
    model = tiny(name)
    src, lengths, tgt = batch()
    logits, attn = model(src, lengths, tgt)
    memory = model.encode(src, lengths)
    state = model.init_state(memory)
    assert isinstance(memory, Memory) and isinstance(state, DecoderState)
    for t in range(tgt.size(1)):
        step_logits, state, weights = model.step(tgt[:, t], state, memory)
        assert torch.allclose(step_logits, logits[:, t], atol=1e-5)
        assert (weights is None) == (attn is None)
        if weights is not None:
            assert torch.allclose(weights, attn[:, t], atol=1e-6)


@pytest.mark.parametrize("name, sees_previous_word", [("search", False), ("search_cond", True)])
def test_conditional_gru_queries_attention_after_reading_the_previous_word(name, sees_previous_word):
    """Position t of teacher forcing reads the previous word ``tgt_in[:, t]``. RNNsearch attends
    there with s_{t-1}, which has not read it yet; the conditional GRU with s'_t, which has."""
    model = tiny(name)
    src, lengths, tgt_in = batch()
    _, attn = model(src, lengths, tgt_in)
    changed = tgt_in.clone()
    changed[:, 2] = (changed[:, 2] + 1 - 4) % (TGT_V - 4) + 4      # another real word at t = 2
    _, attn_changed = model(src, lengths, changed)
    assert torch.equal(attn[:, :2], attn_changed[:, :2])
    assert torch.allclose(attn[:, 2], attn_changed[:, 2]) != sees_previous_word
    assert not torch.allclose(attn[:, 3], attn_changed[:, 3])      # both have read it by t = 3


def test_conditional_gru_initialises_both_updates_orthogonally():
    decoder = tiny("search_cond").decoder
    for rnn in (decoder.rnn, decoder.transition):
        block = rnn.weight_hh_l0[:10]                               # one gate's H x H
        assert torch.allclose(block @ block.T, torch.eye(10), atol=1e-5)
    assert decoder.rnn.weight_ih_l0.shape == (30, 12)               # the word alone (3H x E)
    assert decoder.transition.weight_ih_l0.shape == (30, 20)        # the context (3H x 2H)


def test_reorder_expands_and_permutes_every_field():
    model = tiny("luong_local_m", cell="lstm")
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    index = torch.tensor([2, 2, 0])
    memory_r = reorder(memory, index)
    state = model.init_state(memory)
    logits, state, _ = model.step(tgt[:, 0], state, memory)
    logits_r, state_r, _ = model.step(tgt[index, 0], model.init_state(memory_r), memory_r)
    assert torch.allclose(logits_r, logits[index], atol=1e-6)
    for full, picked in zip(reorder(state, index), state_r):
        assert torch.allclose(full, picked, atol=1e-6)


def test_save_and_load_round_trip(tmp_path):
    model = tiny("search")
    save_model(model, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    src, lengths, tgt = batch()
    assert loaded.config == model.config
    assert torch.equal(loaded(src, lengths, tgt)[0], model(src, lengths, tgt)[0])


def test_decoder_submodules_follow_the_lm_contract():
    decoder = tiny("search").decoder
    assert isinstance(decoder.embedding, torch.nn.Embedding)
    assert isinstance(decoder.rnn, torch.nn.GRU) and decoder.rnn.batch_first
    assert isinstance(decoder.output, torch.nn.Linear) and decoder.output.out_features == TGT_V
    # the previous word is the first E inputs of the first layer
    assert decoder.rnn.weight_ih_l0.shape[1] == 12 + 20


def test_orthogonal_recurrent_init():
    rnn = tiny("search").decoder.rnn
    for block in rnn.weight_hh_l0.split(10):
        assert torch.allclose(block @ block.T, torch.eye(10), atol=1e-5)


@pytest.mark.parametrize("field,value", [("model", "conv_s2s"), ("cell", "gruu"),
                                         ("score", "cosine"), ("attention", "local_x")])
def test_unknown_names_fail_naming_the_key(field, value):
    with pytest.raises(ConfigError, match=rf"model\.{field}"):
        ModelConfig.from_dict({field: value})
    with pytest.raises(ConfigError, match=rf"model\.{field}"):
        build_model(ModelConfig(**{field: value}), 10, 10)


def test_impossible_combinations_fail_naming_the_key():
    with pytest.raises(ConfigError, match=r"model\.score"):
        ModelConfig.from_dict({"model": "luong", "score": "dot", "bidirectional": True})
    with pytest.raises(ConfigError, match=r"model\.hidden_size"):
        ModelConfig.from_dict({"hidden_size": 0})
    with pytest.raises(ConfigError, match=r"model\.unknown_knob"):
        ModelConfig.from_dict({"unknown_knob": 1})


def test_tiny_model_overfits_a_tiny_batch():
    model = tiny("search").train()
    src, lengths, tgt = batch()
    tgt_in = torch.cat([torch.full((3, 1), 2), tgt[:, :-1]], 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(60):
        logits, _ = model(src, lengths, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
