"""Moses tokenisation without escaping, detokenisation, vocabularies and corpus statistics."""
from __future__ import annotations

from collections import Counter

import pytest

from rnnsearch.data.tokenize import (detokenize, length_stats, oov_rate, tokenize_line,
                                     tokenize_lines)
from rnnsearch.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocabulary
from rnnsearch.errors import DataError


def test_no_html_escaping_and_french_elision():
    assert tokenize_line("Don't worry & relax.", "en") == ["Don", "'t", "worry", "&", "relax", "."]
    assert tokenize_line("L'homme est là.", "fr") == ["L'", "homme", "est", "là", "."]


def test_detokenize_restores_raw_text():
    for text, lang in [("Hello, world! It's (almost) 5 o'clock.", "en"),
                       ("Il a dit : « bonjour » à l'homme.", "fr")]:
        assert detokenize(tokenize_line(text, lang), lang) == text


def test_a_zero_width_joiner_stays_inside_its_word():
    """Was: Moses split every word at U+200D / U+200C (``കാര്‍ഡ്`` became three tokens, the joiner
    one of them), in every language. A word-final joiner (Malayalam's old chillu spelling) stays
    with its word, and punctuation and the next word after a space stay apart."""
    zwj, zwnj = "\u200d", "\u200c"
    card, wants = f"കാര്{zwj}ഡ്", f"می{zwnj}خواهم"
    assert tokenize_line(f"{card} {wants}.", "ml") == [card, wants, "."]
    he = f"അവന്{zwj}"
    assert tokenize_line(f"{he} വന്നു, {he}, ശരി", "ml") == [he, "വന്നു", ",", he, ",", "ശരി"]
    assert tokenize_line(f"a {zwj} b", "en") == ["a", zwj, "b"]
    for text in (f"{card} {wants}.", f"{he} വന്നു"):
        assert detokenize(tokenize_line(text, "ml"), "ml") == text


def test_lowercase_option():
    assert tokenize_line("The House", "en", lowercase=True) == ["the", "house"]


def test_parallel_matches_serial():
    lines = [f"Line {i}, with words!" for i in range(50)] * 3
    assert tokenize_lines(lines, "en", workers=2, chunk_size=7) == \
        tokenize_lines(lines, "en", workers=1)


def test_vocabulary_build_encode_decode(tmp_path):
    vocab = Vocabulary.build(Counter("a a a b b c d".split()), max_size=6)
    assert vocab.words == SPECIALS + ("a", "b")
    assert (vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id) == (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
    assert vocab.encode(["a", "c", "b"], add_eos=True) == [4, UNK_ID, 5, EOS_ID]
    assert vocab.decode([BOS_ID, 4, 5, EOS_ID, 4]) == ["a", "b"]
    vocab.save(tmp_path / "v.txt")
    assert Vocabulary.load(tmp_path / "v.txt") == vocab


def test_vocabulary_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("<pad>\t0\n<unk>\t0\n<s>\t0\n</s>\t0\nword no-tab\n")
    with pytest.raises(DataError, match=r"vocab\.txt:5: expected"):
        Vocabulary.load(path)


def test_oov_rate_and_length_stats():
    vocab = Vocabulary.build(Counter({"a": 3, "b": 1}), max_size=5)  # keeps only "a"
    assert oov_rate(["a b", "a a"], vocab) == pytest.approx(0.25)
    stats = length_stats(["a b c", "a", "a b"])
    assert stats["max"] == 3 and stats["p50"] == 2 and stats["mean"] == pytest.approx(2.0)
