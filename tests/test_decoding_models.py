"""Decoding the project's real models (tiny, untrained): every variant decodes, beam k=1 equals
greedy, output independent of batch companions, and degenerate input decodes without crashing."""
from __future__ import annotations

import pytest
import torch

from rnnsearch.data.tokenize import tokenize_line
from rnnsearch.data.vocab import EOS_ID, SPECIALS, Vocabulary
from rnnsearch.decoding.corpus import encode_source, translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.seq2seq import build_model

VARIANTS = {
    "encdec": dict(model="encdec", bidirectional=False),
    "search": dict(model="search"),
    "search_cond": dict(model="search_cond", cell="lstm"),
    "luong_local_p": dict(model="luong", score="dot", bidirectional=False, attention="local_p",
                          window=2, cell="lstm"),
    "transformer": dict(model="transformer", embedding_size=12, hidden_size=12, heads=3,
                        feedforward_size=16, encoder_layers=2, decoder_layers=2),
}
VOCAB = Vocabulary(SPECIALS + tuple("the a cat dog sat on mat . , it".split()), (0,) * 14)


def tiny(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(**{**dict(embedding_size=12, hidden_size=10, attention_size=8,
                                   output_size=10), **VARIANTS[name]})
    return build_model(config, len(VOCAB), 20).eval()


def sources(texts: list[str]) -> list[list[int]]:
    return [encode_source(tokenize_line(t, "en"), VOCAB, add_eos=True) for t in texts]


TEXTS = ["the cat sat on the mat .", "a dog", "it sat", "the dog sat on a cat , the mat .",
         "cat", "on the mat the cat sat ."]
OPTIONS = SearchOptions(beam_size=3, nbest=2, max_len_a=1.0, max_len_b=3)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_beam_one_equals_greedy(name):
    model, src = tiny(name), sources(TEXTS)
    one = SearchOptions(beam_size=1, max_len_a=1.0, max_len_b=3)
    greedy_out = translate_corpus(model, src, "greedy", one, 4, progress=False).translations
    beam_out = translate_corpus(model, src, "beam", one, 4, progress=False).translations
    assert [t.best.tokens for t in greedy_out] == [t.best.tokens for t in beam_out]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_batch_companions_do_not_change_output(name):
    model, src = tiny(name), sources(TEXTS)
    alone = [translate_corpus(model, [s], "beam", OPTIONS, 1, progress=False).translations[0]
             for s in src]
    together = translate_corpus(model, src, "beam", OPTIONS, len(src), progress=False).translations
    for one, many in zip(alone, together):
        assert [h.tokens for h in one.hypotheses] == [h.tokens for h in many.hypotheses]
        assert one.best.score == pytest.approx(many.best.score, abs=1e-4)


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_degenerate_input_decodes(name, method):
    texts = ["", "zebra quokka axolotl", " ".join(["the cat sat"] * 100), "a" * 200,
             " ".join("a" * 200)]
    src = sources(texts)
    assert [len(s) for s in src] == [1, 4, 301, 2, 201]     # </s> added; empty -> [</s>]
    options = SearchOptions(beam_size=3, max_len_cap=40)
    out = translate_corpus(tiny(name), src, method, options, 2, progress=False).translations
    for source, translation in zip(src, out):
        best = translation.best
        assert best.tokens[-1] == EOS_ID and len(best.tokens) <= 40
        if best.attention is not None:
            assert best.attention.shape == (len(best.tokens), len(source))
