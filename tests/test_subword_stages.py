"""The stages after tokenize on subword units, by hand: piece-to-word attention
(rnnsearch.alignment.attention.word_attention, the align_attention stage), word vectors from piece
vectors (rnnsearch.embeddings.evaluation), UNK replacement skipped (the translate stage), and the
presets that run subword units (quick_bpe, subword; ``extends``). The stages themselves run on a
real BPE model in tests/test_subword.py.
"""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

from rnnsearch.config.base import read_params
from rnnsearch.config.repository import repo_root
from rnnsearch.presets import definition
from rnnsearch.alignment.attention import argmax_links, word_attention
from rnnsearch.errors import ConfigError
from rnnsearch.config.sections import validate_params
from rnnsearch.config.translate import TranslateConfig
from rnnsearch.data.subword import TextUnits, word_lines
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.embeddings.evaluation import PIECE_RULE, nearest_neighbours, piece_word_vectors

# --- attention: pieces -> words ----------------------------------------------------------------

# Target words: "Tier" (one piece) and "haus" (pieces ▁hau, s); source words: "ho" (▁h, o), "use"
# (▁use), "." (▁.). Rows are the pieces' attention (each sums to 1).
PIECE_ATTENTION = np.array([[0.1, 0.2, 0.6, 0.1],      # ▁Tier
                            [0.5, 0.3, 0.1, 0.1],      # ▁hau
                            [0.1, 0.1, 0.2, 0.6]],     # s
                           dtype=np.float32)


def test_word_attention_averages_target_pieces_and_sums_source_pieces():
    words = word_attention(PIECE_ATTENTION, src_lengths=[2, 1, 1], tgt_lengths=[1, 2])
    # By hand: Tier: ho = 0.1 + 0.2, use 0.6, . 0.1; haus: the mean of (0.8, 0.1, 0.1) and
    # (0.2, 0.2, 0.6).
    expected = np.array([[0.3, 0.6, 0.1],
                         [0.5, 0.15, 0.35]])
    np.testing.assert_allclose(words, expected, atol=1e-6)
    np.testing.assert_allclose(words.sum(1), 1.0, atol=1e-6)   # rows stay distributions
    assert words.dtype == np.float32
    assert argmax_links(words) == {(1, 0), (0, 1)}             # (source word, target word)


def test_word_attention_of_one_piece_words_is_the_matrix_itself():
    """Word units: every word one unit, the weights come back bit for bit."""
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(5), size=4).astype(np.float32)    # 4 x 5
    assert word_attention(weights, [1] * 5, [1] * 4).tobytes() == weights.tobytes()
    assert word_attention(np.zeros((0, 0), np.float32), [], []).shape == (0, 0)


class Pieces:
    """A stand-in for :class:`TextUnits` with subword units: each word's pieces from a table."""

    subwords = True

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    def split(self, tokens, side):
        return [piece for word in tokens for piece in self.table.get(word, ["▁" + word])]


class FixedAttention:
    """A model whose teacher-forced attention is ``weights`` (one sentence pair)."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights

    def __call__(self, src, src_len, tgt_in):
        steps = tgt_in.size(1)                                      # pieces + <s>
        padded = np.zeros((1, steps, src.size(1)), np.float32)
        padded[0, :len(self.weights)] = self.weights
        return None, torch.from_numpy(padded)


def test_align_attention_scores_piece_models_on_words():
    """The gold pair (German source "ho use .", target "Tier haus") as pieces; the model's piece
    attention becomes the hand-computed word attention, whose links are scored on words."""
    from rnnsearch.alignment.corpus import GoldCorpus
    from rnnsearch.alignment.gold import GoldPair
    from rnnsearch.alignment.mapping import Mapped
    from rnnsearch.config.align import AlignConfig
    from rnnsearch.alignment.attention import split_words, word_matrices
    from rnnsearch.stages.align_attention import score_cell

    src, tgt = ("ho", "use", "."), ("Tier", "haus")
    units = Pieces({"ho": ["▁h", "o"], "haus": ["▁hau", "s"]})
    assert split_words([src], units, "src") == ([["▁h", "o", "▁use", "▁."]], [[2, 1, 1]])
    # The gold set is English-French; here "en" plays the source, "fr" the target.
    links = frozenset({(1, 0), (0, 1)})                             # (en, fr)
    gold = GoldCorpus([GoldPair("1", src, tgt, links, links)],
                      [Mapped(src, ((0,), (1,), (2,)))], [Mapped(tgt, ((0,), (1,)))])
    vocabs = {"src": Vocabulary.build(Counter(["▁h", "o", "▁use", "▁."]), 10),
              "tgt": Vocabulary.build(Counter(["▁Tier", "▁hau", "s"]), 10)}
    model = FixedAttention(PIECE_ATTENTION)
    [matrix] = word_matrices(model, gold, vocabs, "en", units, batch_size=4)
    np.testing.assert_allclose(matrix, [[0.3, 0.6, 0.1], [0.5, 0.15, 0.35]], atol=1e-6)
    result = score_cell(model, gold, vocabs, "en", AlignConfig(figure_sentence="1"), units)
    assert result["scores"]["argmax"]["aer"] == 0.0
    assert result["figure"]["source"] == list(src) and len(result["figure"]["weights"]) == 2


def test_aligners_read_words_back_from_pieces():
    assert word_lines(["▁Ein ▁Bo st on ▁T err ier ▁.", ""]) == ["Ein Boston Terrier .", ""]


# --- word vectors from piece vectors ------------------------------------------------------------

def piece_vectors() -> KeyedVectors:
    kv = KeyedVectors(2)
    kv.add_vectors(["▁ti", "ger", "▁cat", "▁li", "on"],
                   np.array([[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]], dtype=np.float32))
    return kv


SPLIT = {"tiger": ["▁ti", "ger"], "cat": ["▁cat"], "lion": ["▁li", "on"],
         "dog": ["▁do", "g"], "big": ["▁b", "i", "g"]}


def test_a_word_vector_is_the_mean_of_its_pieces_and_coverage_is_counted():
    composed, counts = piece_word_vectors(piece_vectors(), ["tiger", "cat", "dog", "lion"],
                                          SPLIT.__getitem__)
    np.testing.assert_allclose(composed["tiger"], [0.5, 0.5])
    np.testing.assert_allclose(composed["cat"], [1, 1])
    np.testing.assert_allclose(composed["lion"], [1, 1])
    assert "dog" not in composed.key_to_index                 # a piece without a vector: none
    assert counts == {"words": 4, "with_vector": 3, "split": 2}
    assert composed.similarity("cat", "lion") == pytest.approx(1.0)


def test_subword_similarity_reports_its_rule_and_coverage(monkeypatch):
    from rnnsearch.embeddings import evaluation

    monkeypatch.setattr(evaluation, "_read_pairs", lambda path: iter([("tiger", "cat"),
                                                                      ("lion", "dog")]))
    monkeypatch.setattr(evaluation, "word_similarity", lambda kv: {"set": len(kv)})
    result = evaluation.subword_similarity(piece_vectors(), SPLIT.__getitem__)
    assert result == {"set": 3, "similarity_words": {"vector": PIECE_RULE, "words": 4,
                                                     "with_vector": 3, "split": 2}}


def test_probe_neighbours_of_a_split_word_are_pieces():
    rows = nearest_neighbours(piece_vectors(), ["tiger", "big"], 2, SPLIT.__getitem__)
    assert [r["probe"] for r in rows] == ["tiger", "tiger"]    # big: a piece without a vector
    assert {r["neighbour"] for r in rows} <= {"▁cat", "▁li", "on"}   # its own pieces left out


# --- UNK replacement --------------------------------------------------------------------------

@pytest.mark.parametrize("units, attention, unk_replace, skipped", [
    (TextUnits("bpe", {"src": None, "tgt": None}), True, True, True),
    (TextUnits("word", {}), True, True, False),
    (TextUnits("bpe", {"src": None, "tgt": None}), False, True, False),   # nothing to replace from
    (TextUnits("unigram", {"src": None, "tgt": None}), True, False, False),  # not asked for
])
def test_unk_replacement_is_skipped_with_subword_units_and_says_why(units, attention,
                                                                     unk_replace, skipped):
    from rnnsearch.stages.translate import unk_skipped

    note = unk_skipped(TranslateConfig(unk_replace=unk_replace),
                       SimpleNamespace(has_attention=attention), units)
    assert (note is not None) == skipped
    if skipped:
        assert note.startswith(f"skipped: {units.units} units")


# --- presets ----------------------------------------------------------------------------------

def vocabulary_parameters(merged: dict, model: str) -> int:
    """The parameters of ``model`` under the merged params, with their vocabulary sizes."""
    from rnnsearch.models.seq2seq import build_model

    config = validate_params(merged, "preset")["train"].model_config(model)
    sizes = merged["tokenize"]["vocab_size_src"], merged["tokenize"]["vocab_size_tgt"]
    return sum(p.numel() for p in build_model(config, *sizes).parameters())


@pytest.mark.parametrize("name, words, models", [
    ("subword", None, ["encdec", "search"]),
    ("quick_bpe", "quick", ["search"]),
])
def test_subword_presets_have_the_word_models_parameters(name, words, models):
    """Joint BPE with the vocabulary size the preset's comments derive: each model within 0.01%
    of the parameters of the same model on words (the default run's, or quick's)."""
    merged, cells = definition.resolve(name)
    word_params = definition.resolve(words)[0] if words else read_params(
        repo_root() / "params.yaml")
    assert merged["tokenize"]["units"] == "bpe" and merged["tokenize"]["subword"]["joint"]
    assert word_params["tokenize"]["units"] == "word"
    assert cells == [f"{m}-50" for m in models]
    for model in models:
        ratio = vocabulary_parameters(merged, model) / vocabulary_parameters(word_params, model)
        assert abs(ratio - 1) < 1e-4, (model, ratio)


def test_quick_bpe_is_quick_with_other_units():
    quick, bpe = definition.resolve("quick")[0], definition.resolve("quick_bpe")[0]
    assert {k: v for k, v in bpe.items() if k != "tokenize"} == {
        k: v for k, v in quick.items() if k != "tokenize"}
    assert definition.resolve("subword")[0]["train"]["budget"] == read_params(
        repo_root() / "params.yaml")["train"]["budget"]     # the default step budget


def test_extends_naming_no_preset_or_itself_is_refused(tmp_path, monkeypatch):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "loop.yaml").write_text("extends: loop\n")
    (tmp_path / "presets" / "orphan.yaml").write_text("extends: absent\n")
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match="loop.yaml: extends: must name another preset"):
        definition.preset_overrides("loop")
    with pytest.raises(ConfigError, match="no preset 'absent'"):
        definition.preset_overrides("orphan")
