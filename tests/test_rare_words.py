"""Unigram F1 by the word's training frequency (Sennrich et al. 2016): the hand count, the
classes, the rank bins, pieces joined back into words, and length buckets by source words."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_script
from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.evaluation.cell import TestSet as Sentences, evaluate_cell
from rnnsearch.evaluation.rare_words import (RankBins, TrainingWords, rank_edges, unigram_f1,
                                             unit_words)

TRAIN = ["the cat sat on the mat", "the dog sat", "a cat ran"]
# counts: the 3, cat 2, sat 2, a/dog/mat/on/ran 1 -> ranks the 1, cat 2, sat 3, a 4, dog 5,
# mat 6, on 7, ran 8; a vocabulary of 7 entries holds the 3 most frequent
REFS = ["the cat sat on the mat", "the zebra ran"]
HYPS = ["the cat sat on a mat mat", "the the <unk> ran"]


def training(vocab_size: int = 7, min_count: int = 1) -> TrainingWords:
    return TrainingWords.count((line.split() for line in TRAIN), vocab_size, min_count)


def test_classes_follow_the_vocabulary_rule():
    words = training()
    assert [w for w, _ in sorted(words.ranks.items(), key=lambda x: x[1])] == \
        ["the", "cat", "sat", "a", "dog", "mat", "on", "ran"]
    assert words.summary() == {"training_tokens": 12, "training_types": 8, "vocabulary_words": 3}
    assert [words.word_class(w) for w in ("sat", "a", "zebra", "<unk>")] == \
        ["in_vocabulary", "rare", "unseen", "unseen"]
    counts = Counter(w for line in TRAIN for w in line.split())
    for size, min_count in ((7, 1), (100, 2), (5, 1), (100, 1)):
        vocab = Vocabulary.build(counts, size, min_count).words[len(SPECIALS):]
        in_vocab = training(size, min_count)
        assert {w for w in counts if in_vocab.word_class(w) == "in_vocabulary"} == set(vocab)


def test_unigram_f1_against_a_hand_count():
    f1 = unigram_f1([h.split() for h in HYPS], [r.split() for r in REFS], training())
    # sentence 1: in vocabulary the/cat/sat: hyp 3, ref 4 (the twice), matched 3;
    #             rare on, a, mat x2: hyp 4, ref on + mat = 2, matched 2 (mat clipped to 1)
    # sentence 2: in vocabulary the x2: hyp 2, ref 1, matched 1; rare ran: 1, 1, 1;
    #             unseen <unk> against zebra: hyp 1, ref 1, matched 0
    assert f1["in_vocabulary"] == {"f1": 80.0, "precision": 80.0, "recall": 80.0,
                                   "hyp_tokens": 5, "ref_tokens": 5, "matched": 4}
    assert f1["rare"] == {"f1": 75.0, "precision": 60.0, "recall": 100.0,
                          "hyp_tokens": 5, "ref_tokens": 3, "matched": 3}
    assert f1["unseen"] == {"f1": 0.0, "precision": 0.0, "recall": 0.0,
                            "hyp_tokens": 1, "ref_tokens": 1, "matched": 0}
    assert f1["all"] == {"f1": 70.0, "precision": 63.64, "recall": 77.78,
                         "hyp_tokens": 11, "ref_tokens": 9, "matched": 7}
    # 8 training word types: one bin of ranks 1-8 (hyp 10, ref 8, matched 7), then unseen
    assert list(f1["by_rank"]) == ["1-8", "unseen"]
    assert f1["by_rank"]["1-8"]["f1"] == 77.78 and f1["by_rank"]["1-8"]["step"] == 8
    assert f1["by_rank"]["unseen"] == {**f1["unseen"], "step": 16}


def test_a_class_without_tokens_has_no_score():
    f1 = unigram_f1([["the"]], [["the"]], training())
    assert f1["rare"] == {"f1": None, "precision": None, "recall": None,
                          "hyp_tokens": 0, "ref_tokens": 0, "matched": 0}
    only_ref = unigram_f1([[]], [["zebra"]], training())["unseen"]
    assert only_ref["f1"] == 0.0 and only_ref["precision"] is None


def test_rank_bins():
    assert rank_edges(0) == [] and rank_edges(8) == [8] and rank_edges(10) == [10]
    assert rank_edges(15) == [10, 15] and rank_edges(3456) == [10, 20, 50, 100, 200, 500, 1000,
                                                               2000, 3456]
    assert rank_edges(1234) == [10, 20, 50, 100, 200, 500, 1234]     # not 1000, 1234
    words = TrainingWords({f"w{i}": i for i in range(1, 31)}, 25, 30)
    bins = RankBins.of(words)
    assert bins.labels == ("1-10", "11-20", "21-30", "unseen")
    assert bins.steps == (10, 20, 30, 60)
    assert [bins.label(w) for w in ("w1", "w10", "w11", "w30", "w31")] == \
        ["1-10", "1-10", "11-20", "21-30", "unseen"]


def pieces(line: str) -> str:
    """A hand-made segmentation: words of more than three letters split after the third."""
    out = []
    for word in line.split():
        out += ["\u2581" + word[:3]] + ([word[3:]] if len(word) > 3 else [])
    return " ".join(out)


def test_pieces_are_joined_back_into_words():
    assert pieces("the zebra ran") == "\u2581the \u2581zeb ra \u2581ran"
    assert unit_words(pieces("the zebra ran"), subwords=True) == ["the", "zebra", "ran"]
    assert unit_words("the zebra ran", subwords=False) == ["the", "zebra", "ran"]
    split = TrainingWords.count((unit_words(pieces(l), True) for l in TRAIN), 7, 1)
    assert split == training()
    on_pieces = unigram_f1([unit_words(pieces(h), True) for h in HYPS],
                           [unit_words(pieces(r), True) for r in REFS], split)
    assert on_pieces == unigram_f1([h.split() for h in HYPS], [r.split() for r in REFS],
                                   training())


SOURCES = ["a b c", "one two three four five six seven", "x"]
TRAIN_SOURCES = ["a b c d", "a b", "one two"]


def write_test_set(root: Path, subwords: bool) -> None:
    """Raw references, tokenised sources/references (pieces when ``subwords``), vocabularies
    and the training targets of a tiny ``data`` folder."""
    unit = pieces if subwords else (lambda line: line)
    (root / "data/prepared").mkdir(parents=True)
    (root / "data/prepared/test.tgt").write_text("".join(r + "\n" for r in REFS + ["x"]))
    (root / "data/prepared/test.src").write_text("".join(s + "\n" for s in SOURCES))
    tok = root / "data/tokenized"
    tok.mkdir(parents=True)
    (tok / "test.src").write_text("".join(unit(s) + "\n" for s in SOURCES))
    (tok / "test.tgt").write_text("".join(unit(r) + "\n" for r in REFS + ["x"]))
    (tok / "train.tgt").write_text("".join(unit(t) + "\n" for t in TRAIN))
    (tok / "train.src").write_text("".join(unit(t) + "\n" for t in TRAIN_SOURCES))
    for side in ("src", "tgt"):
        Vocabulary(SPECIALS + ("x",), (0,) * 4 + (1,)).save(tok / f"vocab.{side}.txt")


@pytest.mark.parametrize("subwords", [False, True])
def test_length_buckets_count_source_words(tmp_path, subwords):
    write_test_set(tmp_path, subwords)
    test = Sentences.load(tmp_path / "data/prepared", tmp_path / "data/tokenized", [3, 5],
                        subwords=subwords)
    # "one two three four five six seven" is 7 words, 10 pieces: in the 5+ bucket either way
    assert [(b.label, b.indices) for b in test.buckets] == [("0-3", (0, 2)), ("3-5", ()),
                                                            ("5+", (1,))]
    assert test.ref_words[1] == ["the", "zebra", "ran"]


def test_no_unk_words_is_a_word_level_runs_no_unk_subset(tmp_path):
    """With subword units, the sentences with no word outside word-level vocabularies built from
    the training words (pieces joined back) are the No-UNK sentences of a word-level run whose
    vocabularies have the same sizes: a hand count, and the word-level run's own subset."""
    from rnnsearch.config.tokenize import TokenizeConfig
    from rnnsearch.stages.evaluate import read_word_vocabularies

    for subwords in (False, True):
        write_test_set(tmp_path / str(subwords), subwords)
    tok = TokenizeConfig(units="bpe", vocab_size_src=8, vocab_size_tgt=10)
    src_vocab, tgt_vocab = read_word_vocabularies(tok, tmp_path / "True/data/tokenized",
                                                  EvaluateConfig())
    # source ranks: a 2, b 2, c, d, one, two -> 4 words in 8 entries: a, b, c, d
    assert src_vocab.words[len(SPECIALS):] == ("a", "b", "c", "d")
    # target: the, cat, sat, then a, dog, mat (rank order of test_classes_follow...)
    assert tgt_vocab.words[len(SPECIALS):] == ("the", "cat", "sat", "a", "dog", "mat")
    assert read_word_vocabularies(TokenizeConfig(), tmp_path / "True/data/tokenized",
                                  EvaluateConfig()) is None       # words: the run's own
    word_level = tmp_path / "False/data/tokenized"
    src_vocab.save(word_level / "vocab.src.txt")
    tgt_vocab.save(word_level / "vocab.tgt.txt")
    words = Sentences.load(tmp_path / "False/data/prepared", word_level, [3])
    on_pieces = Sentences.load(tmp_path / "True/data/prepared", tmp_path / "True/data/tokenized",
                               [3], subwords=True, word_vocabs=(src_vocab, tgt_vocab))
    # sentence 0: "a b c" -> "the cat sat on the mat": "on" is outside the target's 6 words;
    # with 11 entries it is in, and sentence 0 is the only one ("one" / "zebra", "x" are not)
    assert words.no_unk == on_pieces.no_unk_words == []
    wider = read_word_vocabularies(tok, tmp_path / "True/data/tokenized",
                                   EvaluateConfig(word_vocab_size=11))
    wider[0].save(word_level / "vocab.src.txt")
    wider[1].save(word_level / "vocab.tgt.txt")
    words = Sentences.load(tmp_path / "False/data/prepared", word_level, [3])
    on_pieces = Sentences.load(tmp_path / "True/data/prepared", tmp_path / "True/data/tokenized",
                               [3], subwords=True, word_vocabs=wider)
    assert words.no_unk == on_pieces.no_unk_words == [0]
    assert on_pieces.no_unk == []        # the run's own vocabularies hold "x", not its piece


def write_cell(folder: Path, subwords: bool) -> None:
    """One cell's greedy output: :data:`HYPS` (and ``x``), detokenised and tokenised."""
    folder.mkdir(parents=True)
    hyps = HYPS + ["x"]
    (folder / "greedy.detok.txt").write_text("".join(h + "\n" for h in hyps))
    (folder / "greedy.tok.txt").write_text(
        "".join((pieces(h) if subwords else h) + "\n" for h in hyps))
    (folder / "meta.json").write_text(json.dumps({"model": {"model": "search"},
                                                  "systems": ["greedy"], "sentences": 3}))


def test_existing_keys_stay_as_they_were(tmp_path):
    """The measure adds keys; everything else is what the evaluate stage wrote without it."""
    write_test_set(tmp_path, False)
    write_cell(tmp_path / "search-50", False)
    test = Sentences.load(tmp_path / "data/prepared", tmp_path / "data/tokenized", [3, 5])
    cfg = EvaluateConfig(bootstrap_samples=0)
    before = evaluate_cell("search-50", tmp_path / "search-50", test, cfg)
    after = evaluate_cell("search-50", tmp_path / "search-50", test, cfg, training=training())
    assert after.pop("training_words") == training().summary()
    assert after["systems"]["greedy"].pop("unigram_f1")["rare"]["f1"] == 75.0
    assert json.dumps(after) == json.dumps(before)


def test_evaluate_stage_with_subword_units(tmp_path):
    """The stage joins the pieces of hypotheses, references and training targets back into
    words: the same F1 as the hand count (plus the sentence ``x``, seen nowhere in training)."""
    write_test_set(tmp_path, True)
    write_cell(tmp_path / "data/translations/search-50", True)
    params = (Path(__file__).resolve().parents[1] / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(params.replace("units: word", "units: bpe")
                                          .replace("vocab_size_tgt: 10000", "vocab_size_tgt: 7"))
    done = run_script("evaluate.py", "--cells", "search-50", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics/eval/search-50.json").read_text())
    f1 = metrics["systems"]["greedy"]["unigram_f1"]
    assert f1["rare"]["f1"] == 75.0 and f1["in_vocabulary"]["f1"] == 80.0
    assert f1["unseen"] == {"f1": 50.0, "precision": 50.0, "recall": 50.0, "hyp_tokens": 2,
                            "ref_tokens": 2, "matched": 1}
    assert metrics["training_words"] == {"training_tokens": 12, "training_types": 8,
                                         "vocabulary_words": 3}
    assert metrics["systems"]["greedy"]["by_length"]["0-10"]["n"] == 3
    assert "unigram F1 80.0 on words in the vocabulary, 75.0 rare, 50.0 unseen" in done.stdout
    # the word-level vocabularies (10000 source, 7 target entries) leave no sentence whole
    assert metrics["no_unk_words_sentences"] == 0
    assert metrics["systems"]["greedy"]["no_unk_words"]["n"] == 0


def test_report_table_and_figure(tmp_path):
    """The report's table holds each system's F1 per class; its figure is written; a metrics
    file without a key they read is named with that key."""
    from rnnsearch.config.report import ReportConfig
    from rnnsearch.errors import DataError
    from rnnsearch.reporting.inputs import ReportInputs
    from rnnsearch.reporting.write import write_report

    write_test_set(tmp_path, False)
    write_cell(tmp_path / "search-50", False)
    test = Sentences.load(tmp_path / "data/prepared", tmp_path / "data/tokenized", [3, 5])
    metrics = evaluate_cell("search-50", tmp_path / "search-50", test,
                            EvaluateConfig(bootstrap_samples=0), training=training())
    (tmp_path / "metrics/eval").mkdir(parents=True)
    (tmp_path / "metrics/eval/search-50.json").write_text(json.dumps(metrics))
    write_report(ReportInputs.load(tmp_path / "metrics"), ReportConfig(), tmp_path / "reports")
    table = (tmp_path / "reports/results/rare_words.md").read_text()
    # with the sentence "x" (unseen, matched): all 16 / 22, unseen 2 / 4
    assert "| RNNsearch-50 | greedy | 72.73 | 80.00 | 75.00 | 50.00 |" in table
    assert "the 3 most frequent" in table
    assert (tmp_path / "reports/results/rare_words.tex").is_file()
    assert (tmp_path / "reports/results/rare_words_f1_by_rank.png").is_file()
    del metrics["systems"]["greedy"]["unigram_f1"]["rare"]["f1"]
    (tmp_path / "metrics/eval/search-50.json").write_text(json.dumps(metrics))
    with pytest.raises(DataError, match=r"systems\.greedy\.unigram_f1\.rare\.f1"):
        ReportInputs.load(tmp_path / "metrics")


def test_the_summary_line_names_an_empty_class_or_subset_instead_of_none():
    """Was: ``unigram F1 80.0 on words in the vocabulary, None rare, 50.0 unseen`` when neither
    the output nor the references held a rare word (F1 None), and ``None on the 0 with no word
    outside word-level vocabularies`` for an empty subset."""
    from rnnsearch.stages.evaluate import summary_line

    def row(n: int, bleu: float | None) -> dict:
        return {"n": n, "bleu": bleu}

    system = {"all": row(3, 20.5), "no_unk": row(2, 30.0), "no_unk_words": row(0, None),
              "unk_removed": row(3, 21.0),
              "unigram_f1": {"all": {"f1": 70.0}, "in_vocabulary": {"f1": 80.0},
                             "rare": {"f1": None}, "unseen": {"f1": 50.0}}}
    line = summary_line(system)
    assert "None" not in line, line
    assert ("unigram F1 80.0 on words in the vocabulary, 50.0 unseen (no rare word in the "
            "output or the references)") in line, line
    assert "30.0 on the 2 with no unknown word" in line, line
    assert "no sentence with no word outside word-level vocabularies" in line, line
