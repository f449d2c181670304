"""Search errors and model errors: force-decoding scores exactly what the search scores, and
the shares split the sentences where a narrow and a wide beam disagree."""
from __future__ import annotations

import json
import random

import mlflow
import pytest
import torch

from rnnsearch.data.vocab import EOS_ID, SPECIALS, Vocabulary
from rnnsearch.decoding.beam import beam_search
from rnnsearch.decoding.corpus import pad_sources
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.search_error import forced_scores, search_errors
from rnnsearch.decoding.translator import Translator
from conftest import run_script
from decoding_workspace import SRC, make_workspace
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
    src, src_len = pad_sources(sources)
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
    src, src_len = pad_sources([[5, 6]])
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


def test_the_stage_refuses_files_of_different_lengths_and_writes_and_logs_its_shares(
        tmp_path, monkeypatch):
    root = make_workspace(tmp_path)
    tokenized = root / "data/tokenized"
    (tokenized / "test.tgt").write_text("le chat\nle chien\n", encoding="utf-8")
    args = ["--cell", "search-50"]
    refused = run_script("search_error.py", *args, cwd=root)
    assert refused.returncode == 2
    assert "test.tgt: 2 lines, but data/tokenized/test.src has 4" in refused.stderr
    assert not (root / "metrics/search_error").exists()
    (tokenized / "test.tgt").write_text("le chat\nle chien\n\nla chat\n", encoding="utf-8")
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    done = run_script("search_error.py", *args, cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    figures = json.loads((root / "metrics/search_error/search-50.json").read_text())
    assert figures["cell"] == "search-50" and figures["sentences"] == len(SRC)
    assert figures["wide_beam"] == 50 and figures["beam_size"] == 3      # params.yaml's, tiny
    assert 0.0 <= figures["model_error"] <= 1.0
    assert figures["environment"]["torch"] == torch.__version__   # the machine behind the figures
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["MLFLOW_TRACKING_URI"])
    logged = mlflow.search_runs(filter_string="tags.mlflow.runName LIKE 'search_error-search-50%'",
                                search_all_experiments=True)
    assert logged["metrics.search_error/model_error"].tolist() == [figures["model_error"]]


def test_the_wide_beam_decodes_as_many_hypotheses_at_once_as_the_beam(monkeypatch):
    """Beam 5 over 10 sentences a batch is 50 hypotheses; a beam of 25 then takes 2 sentences a
    batch (not 10 x 25, which ran a Transformer's caches out of memory)."""
    translator = Translator(TinyAttentionModel(seed=4), VOCAB, VOCAB)
    batches: list[tuple[int, int]] = []
    translate = Translator.translate

    def recording(self, sources, method, options, batch_size, **kwargs):
        batches.append((options.beam_size, batch_size))
        return translate(self, sources, method, options, batch_size, **kwargs)

    monkeypatch.setattr(Translator, "translate", recording)
    options = SearchOptions(beam_size=5, nbest=1)
    words = sentences(4)
    search_errors(translator, words, words, options, 25, 10)
    assert batches == [(5, 10), (25, 2)]
