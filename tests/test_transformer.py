"""The Transformer encoder-decoder behind the recurrent models' interface: a step-by-step decode
computes what teacher forcing computes, padding changes nothing, its params are checked naming
the key, and its settings never change how the other models are saved. (Decoding, training,
exact resume and supervised attention run it beside the other models in their own tests.)"""
from __future__ import annotations

import pytest
import torch

from rnnsearch.config.base import from_dict
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import TrainConfig
from rnnsearch.errors import ConfigError
from rnnsearch.models.seq2seq import build_model, load_model, save_model
from rnnsearch.models.transformer import sinusoids

SMALL = dict(model="transformer", embedding_size=16, hidden_size=7, heads=4, feedforward_size=24,
             encoder_layers=2, decoder_layers=3)      # hidden_size: not read


def small(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig(**{**SMALL, **overrides}), 30, 25).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two source sentences (5 and 3 ids, padded) and their target prefixes (4 and 3 ids)."""
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    tgt_in = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 0]])
    return src, torch.tensor([5, 3]), tgt_in


@pytest.mark.parametrize("alignment_layer", [-1, 0])
def test_steps_compute_the_teacher_forced_logits_and_attention(alignment_layer):
    model = small(alignment_layer=alignment_layer)
    src, src_len, tgt_in = batch()
    logits, attention = model(src, src_len, tgt_in)          # 2 x 4 x 25, 2 x 4 x 5
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    for t in range(tgt_in.size(1)):
        step_logits, state, weights = model.step(tgt_in[:, t], state, memory)
        torch.testing.assert_close(step_logits, logits[:, t], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(weights, attention[:, t], rtol=1e-5, atol=1e-6)
    assert state.length == 4 and len(state.keys) == len(state.values) == 3      # layers
    assert state.keys[0].shape[:3] == (2, 4, 4)               # batch x heads x dh x capacity


def test_a_state_stepped_twice_keeps_both_branches_and_a_full_cache_grows():
    """A step appends in place; stepping the same state again (an exhaustive search does)
    copies first, so each branch decodes what it would alone, past the first capacity too."""
    model = small()
    src, src_len, _ = batch()
    memory = model.encode(src, src_len)
    words = torch.tensor([[11, 12], [13, 14], [15, 16]] * 7)             # 21 steps x batch

    def decoded(prefix, last):
        state = model.init_state(memory)
        for prev in prefix:
            _, state, _ = model.step(prev, state, memory)
        return state, model.step(last, state, memory)[0]

    state, first = decoded(words[:-1], words[-1])
    assert state.length == 20 and state.values[0].size(2) == 32      # grown from 16
    second = model.step(words[-1] + 1, state, memory)[0]
    again = model.step(words[-1], state, memory)[0]
    assert torch.equal(again, first) and not torch.equal(second, first)
    assert torch.equal(second, decoded(words[:-1], words[-1] + 1)[1])


def test_the_attention_can_be_read_from_another_layer_as_if_it_were_the_alignment_layer():
    """What ``presets layers`` relies on: reading layer 0 of a model trained to align layer -1
    gives what a model whose alignment_layer is 0 returns, weights and logits alike."""
    src, src_len, tgt_in = batch()
    logits, first = small(alignment_layer=0)(src, src_len, tgt_in)
    model = small()
    _, last = model(src, src_len, tgt_in)
    model.decoder.read_attention_from(0)
    again_logits, again = model(src, src_len, tgt_in)
    assert not torch.allclose(first, last)
    torch.testing.assert_close(again, first)
    torch.testing.assert_close(again_logits, logits)
    with pytest.raises(ValueError, match=r"layer 3: the decoder has 3 layers \(0 to 2, or -1"):
        model.decoder.read_attention_from(3)


def test_the_attention_is_a_distribution_over_the_real_source_words_only():
    src, src_len, tgt_in = batch()
    _, attention = small()(src, src_len, tgt_in)
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 4))
    assert torch.all(attention[1, :, 3:] == 0)                # the second sentence's padding


def test_a_sentence_encodes_alike_alone_and_beside_a_longer_one():
    model = small()
    src, src_len, _ = batch()
    together = model.encoder(src, src_len)                   # outputs, their mean, ...
    alone = model.encoder(src[1:, :3], src_len[1:])
    torch.testing.assert_close(together[0][1, :3], alone[0][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(together[1][1], alone[1][0], rtol=1e-5, atol=1e-6)
    keys = model.encode(src, src_len).cross_keys[0]           # batch x h x dh x S
    alone_keys = model.encode(src[1:, :3], src_len[1:]).cross_keys[0]
    torch.testing.assert_close(keys[1, ..., :3], alone_keys[0], rtol=1e-5, atol=1e-6)


def test_positions_are_vaswanis_sinusoids():
    encoded = sinusoids(torch.tensor([0, 3]), 6)              # 2 x 6
    rates = [1.0, 10000 ** (-2 / 6), 10000 ** (-4 / 6)]
    expected = [[f(p * r) for r in rates for f in (torch.sin, torch.cos)]
                for p in (torch.tensor(0.0), torch.tensor(3.0))]
    torch.testing.assert_close(encoded, torch.tensor([[float(v) for v in row] for row in expected]))


def test_a_saved_transformer_loads_with_its_settings(tmp_path):
    model = small(heads=2, alignment_layer=1)
    save_model(model, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    assert loaded.config == model.config and loaded.has_attention
    src, src_len, tgt_in = batch()
    torch.testing.assert_close(loaded(src, src_len, tgt_in)[0], model(src, src_len, tgt_in)[0])


def test_the_other_models_are_saved_without_the_transformers_settings():
    """So that a recurrent model's file (and its DVC hash) is what it was before they existed."""
    for name in ("search", "encdec", "luong"):
        saved = ModelConfig(model=name).to_dict()
        assert not {"heads", "feedforward_size", "alignment_layer"} & saved.keys(), name
    assert {"heads", "feedforward_size", "alignment_layer"} <= ModelConfig(**SMALL).to_dict().keys()


@pytest.mark.parametrize("overrides, message", [
    ({"heads": 3}, r"train.models.t.heads: must divide embedding_size \(the transformer's width, "
                   r"16\), got 3"),
    ({"heads": 0}, r"train.models.t.heads"),
    ({"alignment_layer": 3}, r"train.models.t.alignment_layer: must name one of the 3 decoder "
                             r"layers \(-3..2\), got 3"),
    ({"alignment_layer": -4}, r"train.models.t.alignment_layer"),
    ({"feedforward_size": 0}, r"train.models.t.feedforward_size"),
])
def test_bad_transformer_settings_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**{**SMALL, **overrides}).check("train.models.t")


def test_the_transformer_reads_no_score_and_the_rnns_still_check_theirs():
    ModelConfig(**SMALL, score="additive", attention="local_p").check()   # not read: accepted
    with pytest.raises(ConfigError, match="model search accepts"):
        ModelConfig(model="search", score="dot").check()


def test_an_lm_initialised_decoder_is_refused_for_the_transformer():
    params = {"grid": {"models": ["t"], "max_lens": [12]},
              "base_model": {"embedding_size": 16, "hidden_size": 16},
              "models": {"t": {"model": "transformer"}}, "init": {"lm": True}}
    config = from_dict(TrainConfig, params, "train")
    with pytest.raises(ConfigError, match=r"train.models.t.model: is 'transformer', which has no "
                                          r"recurrent decoder for train.init.lm"):
        config.check_params("train", {"pretrain_lm": {"embedding_size": 16, "hidden_size": 16}})
