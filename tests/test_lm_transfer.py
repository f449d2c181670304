"""The LM -> decoder contract: decoder_init.pt, what is copied, and errors naming both shapes."""
from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from rnnsearch.errors import DataError
from rnnsearch.lm.model import LanguageModel
from rnnsearch.models.lm_transfer import load_lm_into_decoder, save_decoder_init
from rnnsearch.models.rnn import make_rnn

V, E, H, CONTEXT = 12, 4, 6, 5


class ToyDecoder(nn.Module):
    """A decoder core as the contract describes it: the RNN also reads a context vector."""

    def __init__(self, cell: str = "lstm", vocab: int = V, emb: int = E, hidden: int = H,
                 output_in: int = H) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = make_rnn(cell, emb + CONTEXT, hidden)
        self.attention = nn.Linear(hidden, hidden)
        self.output = nn.Linear(output_in, vocab)


@pytest.fixture
def lm_file(tmp_path):
    torch.manual_seed(0)
    model = LanguageModel("lstm", V, E, H)
    path = tmp_path / "decoder_init.pt"
    save_decoder_init(model, path)
    return model, path


def test_decoder_init_file_follows_the_contract(lm_file):
    model, path = lm_file
    saved = torch.load(path, weights_only=True)
    assert saved["meta"] == {"cell": "lstm", "vocab_size": V, "embedding_size": E,
                             "hidden_size": H, "num_layers": 1}
    assert saved["state_dict"]["embedding.weight"].shape == (V, E)
    assert saved["state_dict"]["rnn.weight_ih_l0"].shape == (4 * H, E)
    assert saved["state_dict"]["output.weight"].shape == (V, H)


def test_load_copies_word_columns_and_keeps_context_columns(lm_file):
    model, path = lm_file
    decoder = ToyDecoder()
    context_before = decoder.rnn.weight_ih_l0[:, E:].clone()
    attention_before = decoder.attention.weight.clone()
    fraction = load_lm_into_decoder(decoder, path)
    assert torch.equal(decoder.embedding.weight, model.embedding.weight)
    assert torch.equal(decoder.rnn.weight_ih_l0[:, :E], model.rnn.weight_ih_l0)
    assert torch.equal(decoder.rnn.weight_ih_l0[:, E:], context_before)
    assert torch.equal(decoder.rnn.weight_hh_l0, model.rnn.weight_hh_l0)
    assert torch.equal(decoder.attention.weight, attention_before)
    copied = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("output."))
    total = sum(p.numel() for p in decoder.parameters())
    assert fraction == pytest.approx(copied / total)


@pytest.mark.parametrize("output_in", [H, H + 3], ids=["same shape", "another shape"])
def test_the_output_layer_keeps_its_init(lm_file, output_in):
    """Was: the LM's softmax copied into the decoder's output layer whenever the shapes matched,
    though that layer reads the deep output or Luong's attentional state, not the RNN state."""
    _, path = lm_file
    decoder = ToyDecoder(output_in=output_in)
    before = [p.clone() for p in decoder.output.parameters()]
    load_lm_into_decoder(decoder, path)
    assert all(torch.equal(a, b) for a, b in zip(decoder.output.parameters(), before))


@pytest.mark.parametrize("kind", ["search", "search_cond", "encdec", "luong"])
def test_rnnsearchs_deep_output_is_not_the_lms_softmax(tmp_path, kind):
    """The grid's own decoders, output_size = hidden_size so that the shapes agree: everything
    but the output layer that fits comes from the LM; the output layer keeps its init."""
    from rnnsearch.config.model import ModelConfig
    from rnnsearch.models.seq2seq import build_model

    torch.manual_seed(0)
    lm = LanguageModel("gru", V, E, H)
    save_decoder_init(lm, tmp_path / "decoder_init.pt")
    config = ModelConfig(model=kind, cell="gru", embedding_size=E, hidden_size=H, output_size=H,
                         attention_size=H, bidirectional=kind != "luong", maxout=False)
    decoder = build_model(config, V, V).decoder
    before = decoder.output.weight.clone()
    load_lm_into_decoder(decoder, tmp_path / "decoder_init.pt")
    assert decoder.output.weight.shape == lm.output.weight.shape
    assert torch.equal(decoder.output.weight, before)
    assert torch.equal(decoder.rnn.weight_hh_l0, lm.rnn.weight_hh_l0)
    assert torch.equal(decoder.rnn.weight_ih_l0[:, :E], lm.rnn.weight_ih_l0)  # search_cond: all of it


@pytest.mark.parametrize("lm, message", [
    ({"cell": "lstm"}, "train.models.search.cell: is 'gru' but pretrain_lm.cell is 'lstm'"),
    ({"cell": "gru", "hidden_size": 512},
     "train.models.search.hidden_size: is 256 but pretrain_lm.hidden_size is 512"),
    ({"cell": "gru", "num_layers": 2},
     "train.models.search.decoder_layers: is 1 but the language model has 2"),
])
def test_init_lm_that_does_not_fit_the_lm_is_refused_at_config_time(lm, message):
    from rnnsearch.config.base import check_params, from_dict
    from rnnsearch.errors import ConfigError
    from rnnsearch.config.train import TrainConfig

    train = {"grid": {"models": ["search"], "max_lens": [30]}, "init": {"lm": True},
             "models": {"search": {"model": "search"}}}
    config = from_dict(TrainConfig, train, "train")
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        check_params(config, "train", {"pretrain_lm": lm, "train": train})
    check_params(config, "train", {"pretrain_lm": {"cell": "gru"}, "train": train})


@pytest.mark.parametrize("decoder, shapes", [
    (ToyDecoder(vocab=V + 1), [(V, E), (V + 1, E)]),
    (ToyDecoder(emb=E + 2), [(V, E), (V, E + 2)]),
    (ToyDecoder(hidden=H + 1), [(4 * H, H), (4 * (H + 1), H + 1)]),
    (ToyDecoder(cell="gru"), [(4 * H, H), (3 * H, H)]),
], ids=["vocab", "embedding", "hidden", "cell"])
def test_mismatch_names_both_shapes(lm_file, decoder, shapes):
    _, path = lm_file
    with pytest.raises(DataError) as err:
        load_lm_into_decoder(decoder, path)
    for shape in shapes:
        assert str(shape) in str(err.value)
