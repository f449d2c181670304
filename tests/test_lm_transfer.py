"""The LM -> decoder contract: decoder_init.pt, what is copied, and errors naming both shapes."""
from __future__ import annotations

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
    assert torch.equal(decoder.output.weight, model.output.weight)
    assert torch.equal(decoder.attention.weight, attention_before)
    copied = sum(p.numel() for p in model.parameters())
    total = sum(p.numel() for p in decoder.parameters())
    assert fraction == pytest.approx(copied / total)


def test_output_layer_of_another_shape_keeps_its_init(lm_file):
    _, path = lm_file
    decoder = ToyDecoder(output_in=H + 3)  # a deep output reading more than s_i
    before = decoder.output.weight.clone()
    load_lm_into_decoder(decoder, path)
    assert torch.equal(decoder.output.weight, before)


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
