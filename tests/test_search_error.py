"""Search errors and model errors: force-decoding scores exactly what the search scores, and
the shares split the sentences where a narrow and a wide beam disagree."""
from __future__ import annotations

import json
import random

import mlflow
import pytest
import torch

from rnnsearch.data.vocab import EOS_ID, SPECIALS, Vocabulary
from rnnsearch.decoding import search_error
from rnnsearch.decoding.beam import beam_search
from rnnsearch.decoding.corpus import pad_batch
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.search_error import forced_scores, search_errors
from rnnsearch.decoding.translator import Translator
from test_decoding_toy import TinyAttentionModel

WORDS = SPECIALS + tuple(f"w{i}" for i in range(30 - len(SPECIALS)))
VOCAB = Vocabulary(WORDS, (1,) * len(WORDS))


def sentences(count: int, seed: int = 3) -> list[list[str]]:
    rng = random.Random(seed)
    return [rng.choices(WORDS[len(SPECIALS):], k=rng.randint(1, 6)) for _ in range(count)]


@pytest.mark.parametrize("penalty", ["none", "mean", "gnmt"])
def test_forcing_the_beams_outputs_gives_their_scores(penalty):
    """Each n-best hypothesis forced through the decoder scores what the beam summed, in a
    batch of sentences of different lengths (padding and the length limit included)."""
    model = TinyAttentionModel()
    options = SearchOptions(beam_size=3, nbest=3, length_penalty=penalty, max_len_a=1.0,
                            max_len_b=2)
    sources = [VOCAB.encode(words) for words in sentences(6)]
    src, src_len = pad_batch(sources)
    with torch.inference_mode():
        found = beam_search(model, src, src_len, options)
        for rank in range(3):
            outputs = [t.hypotheses[rank] for t in found]
            targets = [list(h.tokens[:-1]) for h in outputs]
            assert all(h.tokens[-1] == EOS_ID for h in outputs)
            forced = forced_scores(model, src, src_len, targets, options)
            assert forced == pytest.approx([h.score for h in outputs], abs=1e-9)


def test_a_reference_past_the_length_limit_scores_minus_infinity():
    model = TinyAttentionModel()
    options = SearchOptions(max_len_a=0.0, max_len_b=3)          # 3 tokens, </s> included
    src, src_len = pad_batch([[5, 6]])
    assert forced_scores(model, src, src_len, [[7, 8, 9]], options) == [-float("inf")]
    assert forced_scores(model, src, src_len, [[7, 8]], options)[0] > -float("inf")


def test_shares_split_the_sentences_where_a_wide_beam_disagrees():
    """References = the wide beam's outputs: a sentence whose narrow output differs is either a
    search error (the reference, forced, scores higher) or a model error, never both; the
    references themselves as outputs make no error at all."""
    translator = Translator(TinyAttentionModel(seed=1), VOCAB, VOCAB)
    options = SearchOptions(beam_size=1, nbest=1, length_penalty="none")
    sources = sentences(24)
    wide = translator.translate(sources, "beam", SearchOptions(beam_size=8, nbest=1,
                                                                length_penalty="none"), 5,
                                progress=False)
    references = [VOCAB.decode(t.best.tokens) for t in wide.translations]
    narrow = translator.translate(sources, "beam", options, 5, progress=False)
    differ = sum(n.best.tokens != w.best.tokens
                 for n, w in zip(narrow.translations, wide.translations)) / len(sources)
    shares = search_errors(translator, sources, references, options, 8, 5)
    assert differ > 0
    assert shares["reference_above_beam"] == shares["wide_beam_above_beam"]
    assert shares["reference_above_beam"] + shares["model_error"] == pytest.approx(differ)
    own = [VOCAB.decode(t.best.tokens) for t in narrow.translations]
    exact = search_errors(translator, sources, own, options, 1, 5)
    assert exact["reference_above_beam"] == exact["model_error"] == 0.0


def test_the_command_refuses_files_of_different_lengths_and_writes_its_figures(
        tmp_path, monkeypatch, capsys):
    translator = Translator(TinyAttentionModel(seed=2), VOCAB, VOCAB)
    monkeypatch.setattr(Translator, "load", classmethod(lambda cls, *a, **k: translator))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.txt").write_text("w1 w2\nw3\nw4 w5 w6\n")
    (tmp_path / "r.txt").write_text("w2 w1\nw3\n")
    base = ["--model", "m.pt", "--vocab-dir", ".", "--sources", "s.txt", "--references", "r.txt"]
    assert search_error.main(base) == 2
    assert "r.txt: 2 lines, but s.txt has 3" in capsys.readouterr().err
    (tmp_path / "r.txt").write_text("w2 w1\nw3\nw4\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert search_error.main([*base, "--wide-beam", "4", "--out", "e.json",
                              "--mlflow", "search_error-toy"]) == 0
    figures = json.loads((tmp_path / "e.json").read_text())
    assert figures["sentences"] == 3 and figures["wide_beam"] == 4
    assert 0.0 <= figures["model_error"] <= 1.0
    logged = mlflow.search_runs(filter_string="tags.mlflow.runName = 'search_error-toy'")
    assert logged["metrics.search_error/model_error"].tolist() == [figures["model_error"]]
