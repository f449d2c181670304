"""Word alignment: EM for IBM Model 1 / fast_align, symmetrisation, AER, the gold reader, the
gold-to-pipeline token mapping and attention links from forced decoding."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnsearch.alignment.aer import (aer_of_counts, alignment_scores, diagonal_links,
                                    paired_bootstrap_aer, sentence_counts)
from rnnsearch.alignment.attention import (argmax_links, attention_counts, forced_attention,
                                          threshold_links)
from rnnsearch.alignment.gold import read_gold, read_sentences
from rnnsearch.alignment.ibm1 import DiagonalPrior, dense_ids, normalise, train_model1, viterbi
from rnnsearch.alignment.mapping import NgramCounts, map_corpus, map_sentence
from rnnsearch.alignment.symmetrize import (grow_diag, grow_diag_final, grow_diag_final_and,
                                            links_from_choices, symmetrise)
from rnnsearch.config.align import AlignConfig
from rnnsearch.config.base import from_dict
from rnnsearch.errors import ConfigError, DataError
from rnnsearch.data.vocab import BOS_ID, PAD_ID

CORPUS = [("the house", "la maison"), ("the book", "le livre"), ("a book", "un livre"),
          ("a house", "une maison"), ("the small house", "la petite maison"),
          ("small book", "petit livre")]


def split(pairs):
    return [e.split() for e, _ in pairs], [f.split() for _, f in pairs]


@pytest.mark.parametrize("prior", [None, DiagonalPrior()], ids=["ibm1", "fast_align"])
def test_em_learns_the_obvious_translations_and_likelihood_never_decreases(prior):
    e, f = split(CORPUS)
    model, groups = train_model1(e, f, iterations=30, prior=prior, progress=False)
    table = model.table()
    for src, tgt in (("house", "maison"), ("book", "livre")):
        best = max((p, word) for (s, word), p in table.items() if s == src)
        assert best[1] == tgt and best[0] > 0.8, (src, best)
    ll = model.log_likelihood
    assert len(ll) == 31
    assert all(b >= a - 1e-12 for a, b in zip(ll, ll[1:])), ll
    assert ll[-1] > ll[0]
    assert viterbi(model, groups, 1) == [[0, 1]]       # la -> the, maison -> house


def test_em_table_is_a_distribution_per_source_word():
    e, f = split(CORPUS)
    model, _ = train_model1(e, f, iterations=3, progress=False)
    totals = np.bincount(model.pair_src, model.t)
    assert np.allclose(totals[totals > 0], 1.0)


def test_variational_m_step_equals_a_hand_computation():
    """alpha = 1/2 and counts ending in .5 make every digamma argument a whole number, where
    digamma(n + 1) = digamma(n) + 1/n: source 0 has counts 2.5 and 0.5 (+ alpha: 3 and 1, total
    4), source 1 a single count 1.5 (+ alpha: 2, total 2)."""
    counts = np.array([2.5, 0.5, 1.5])
    pair_src = np.array([0, 0, 1])
    t = normalise(counts, pair_src, 2, alpha=0.5)
    # digamma(3) - digamma(4) = -1/3; digamma(1) - digamma(4) = -(1 + 1/2 + 1/3); 2 - 2: 0
    assert t == pytest.approx([np.exp(-1 / 3), np.exp(-11 / 6), 1.0], rel=1e-12)
    assert t[:2].sum() < 1.0                       # the prior takes mass from the table
    assert normalise(counts, pair_src, 2) == pytest.approx([2.5 / 3, 0.5 / 3, 1.0])   # EM


def test_variational_training_of_one_pair_equals_a_hand_computation():
    """Source "a" (plus NULL) and target "x y": from uniform t each target word's posterior is
    1/2 on NULL and 1/2 on a, so every (e, f) count is 1/2. With alpha = 1/2 the M-step gives
    t = exp(digamma(1) - digamma(2)) = exp(-1) to all four pairs, and the next E-step's
    per-token value log(1/2 e^-1 + 1/2 e^-1) = -1; plain EM gives t = 1/2 and log(1/2)."""
    vb, _ = train_model1([["a"]], [["x", "y"]], iterations=0, progress=False, alpha=0.5)
    assert vb.table() == pytest.approx({(e, f): np.exp(-1.0) for e in ("<null>", "a")
                                        for f in ("x", "y")}, rel=1e-12)
    assert vb.log_likelihood == pytest.approx([-1.0], rel=1e-12)
    em, _ = train_model1([["a"]], [["x", "y"]], iterations=0, progress=False)
    assert em.log_likelihood == pytest.approx([np.log(0.5)], rel=1e-12)


def test_variational_bayes_still_learns_the_obvious_translations():
    e, f = split(CORPUS)
    model, groups = train_model1(e, f, iterations=10, prior=DiagonalPrior(), progress=False,
                                 alpha=0.01)
    table = model.table()
    for src, tgt in (("house", "maison"), ("book", "livre")):
        assert max((p, word) for (s, word), p in table.items() if s == src)[1] == tgt
    assert viterbi(model, groups, 1) == [[0, 1]]


def test_dense_ids_agree_with_numpy_unique():
    rng = np.random.default_rng(0)
    for high in (50, 2 ** 60):
        keys = rng.integers(0, high, 5000)
        unique, ids = dense_ids(keys)
        expected_unique, expected_ids = np.unique(keys, return_inverse=True)
        assert np.array_equal(unique, expected_unique) and np.array_equal(ids, expected_ids)


def test_aer_equals_a_hand_computation_and_zero_for_the_gold():
    sure = frozenset({(0, 0), (1, 1)})
    possible = frozenset({(0, 0), (1, 1), (1, 2)})
    predicted = {(0, 0), (1, 2), (2, 2)}
    # |A| = 3, |S| = 2, |A∩S| = 1, |A∩P| = 2: AER = 1 - 3/5, precision 2/3, recall 1/2
    scores = alignment_scores([predicted], [sure], [possible])
    assert scores["aer"] == pytest.approx(0.4)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(0.5)
    assert alignment_scores([set(sure)], [sure], [possible])["aer"] == 0.0


def test_per_sentence_counts_sum_to_the_corpus_aer():
    sure, possible = frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (1, 1), (1, 2)})
    counts = sentence_counts([{(0, 0), (1, 2), (2, 2)}, set(sure)], [sure, sure],
                             [possible, possible])
    assert counts.tolist() == [[3, 1, 2, 2], [2, 2, 2, 2]]
    # |A| = 5, |S| = 4, |A∩S| = 3, |A∩P| = 4: AER = 1 - 7/9
    assert aer_of_counts(counts.sum(0)) == pytest.approx(2 / 9)
    assert aer_of_counts(np.zeros(4, dtype=np.int64)) == 0.0


def test_paired_bootstrap_of_aer_tells_a_real_difference_from_a_tie():
    """Counts |A|, |A∩S|, |A∩P|, |S| per sentence: a perfect sentence and one with a single
    link, wrong."""
    perfect, wrong = [2, 2, 2, 2], [1, 0, 0, 2]
    better, worse = np.array([perfect] * 60), np.array([wrong] * 60)
    assert paired_bootstrap_aer(better, worse, 999, seed=7) == pytest.approx(1 / 1000)
    # each system wins on half the sentences: the same corpus AER, no evidence of a difference
    half = np.array([perfect] * 30 + [wrong] * 30)
    p = paired_bootstrap_aer(half, half[::-1].copy(), 999, seed=7)
    assert p > 0.3 and p == paired_bootstrap_aer(half, half[::-1].copy(), 999, seed=7)
    with pytest.raises(ValueError, match="not the same sentences"):
        paired_bootstrap_aer(better, worse[:-1], 99, seed=7)


def test_diagonal_links_follow_the_length_ratio():
    assert diagonal_links(2, 4) == {(0, 0), (1, 1), (1, 2), (1, 3)}   # 0.5 rounds up


def test_symmetrisations_on_a_hand_made_example():
    e2f = {(0, 0), (1, 1), (2, 3)}
    f2e = {(0, 0), (1, 1), (1, 2), (3, 3)}
    assert symmetrise("intersection", e2f, f2e) == {(0, 0), (1, 1)}
    assert symmetrise("union", e2f, f2e) == e2f | f2e
    # grow: (1, 2) neighbours (1, 1) and French word 2 is unaligned; then (2, 3), diagonal to
    # (1, 2), English word 2 unaligned; then (3, 3) next to (2, 3), English word 3 unaligned:
    # grow-diag alone takes the whole union, so the final steps have nothing left to add
    union = {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)}
    assert grow_diag(e2f, f2e)[0] == union
    assert grow_diag_final(e2f, f2e) == symmetrise("grow-diag-final-and", e2f, f2e) == union
    assert links_from_choices([1, -1, 0], target_is_f=True) == {(1, 0), (0, 2)}
    assert links_from_choices([1, -1, 0], target_is_f=False) == {(0, 1), (2, 0)}


def test_grow_diag_final_and_on_a_hand_made_grid():
    """6 x 6 words, one direction A and the other B (links (e, f)):

        A = (0,0) (1,1) (3,4) (5,5)        B = (0,0) (2,2) (4,4) (5,3)

    grow-diag from the intersection {(0,0)}: (1,1) is its diagonal neighbour with both words
    unaligned, then (2,2) the diagonal neighbour of (1,1); no other union point touches these.
    final-and, A first in (e, f) order: (3,4) and (5,5) join (all four words unaligned); then
    B: (4,4) does not (French 4 was taken by (3,4) a moment before, although both its words
    were free when the final step began), nor (5,3) (English 5 taken by (5,5)). grow-diag-final
    adds those two (one word unaligned is enough), giving the union."""
    a = {(0, 0), (1, 1), (3, 4), (5, 5)}
    b = {(0, 0), (2, 2), (4, 4), (5, 3)}
    grown, aligned_e, aligned_f = grow_diag(a, b)
    assert grown == {(0, 0), (1, 1), (2, 2)} and aligned_e == aligned_f == {0, 1, 2}
    assert grow_diag_final_and(a, b) == {(0, 0), (1, 1), (2, 2), (3, 4), (5, 5)}
    assert grow_diag_final(a, b) == a | b
    # the final step's order matters: B first takes (4,4) and (5,3), and then A's (3,4) and
    # (5,5) share a word with them
    assert grow_diag_final_and(b, a) == {(0, 0), (1, 1), (2, 2), (4, 4), (5, 3)}


@pytest.mark.parametrize("key, value, message", [
    ("alpha", 0, r"align.alpha: must be a finite number > 0 \(fast_align_vb's Dirichlet prior\)"),
    ("alpha", -0.01, "align.alpha: must be a finite number > 0"),
    ("alpha", float("inf"), "align.alpha: must be a finite number"),
    ("symmetrize", ["gdfa"], "align.symmetrize"),
    ("models", ["fast_align_v"], "align.models"),
])
def test_align_config_refuses_bad_new_values_naming_the_key(key, value, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        from_dict(AlignConfig, {key: value}, "align")
    cfg = from_dict(AlignConfig, {"models": ["fast_align_vb"], "alpha": 0.01,
                                  "symmetrize": ["grow-diag-final-and"]}, "align")
    assert cfg.models == ("fast_align_vb",) and cfg.symmetrize == ("grow-diag-final-and",)


def write_gold(folder: Path, links: str) -> dict[str, Path]:
    (folder / "test.e").write_bytes("<s snum=0001> i am here .  </s>\n<s snum=0002> « yes »  </s>\n"
                                    .encode("latin-1"))
    (folder / "test.f").write_bytes("<s snum=0001> je suis ici .  </s>\n<s snum=0002> oui  </s>\n"
                                    .encode("latin-1"))
    (folder / "test.wa.nonullalign").write_text(links, encoding="ascii")
    return {"test.e": folder / "test.e", "test.f": folder / "test.f",
            "test.wa.nonullalign": folder / "test.wa.nonullalign"}


def test_gold_reader_reads_sure_and_possible_links(tmp_path):
    gold = read_gold(write_gold(tmp_path, "0001 1 1 S\n0001 2 2 P\n0001 0 3 P\n0002 2 1 S\n"))
    assert [g.ident for g in gold] == ["1", "2"]
    assert gold[1].en == ("«", "yes", "»")
    assert gold[0].sure == {(0, 0)} and gold[0].possible == {(0, 0), (1, 1)}   # NULL link skipped
    assert gold[1].sure == {(1, 0)}


@pytest.mark.parametrize("line, message", [
    ("0001 5 1 S", "test.wa.nonullalign:2: link 5-1 is outside sentence 1"),
    ("0003 1 1 S", "test.wa.nonullalign:2: sentence 3 is not in the gold text"),
    ("0001 1 1 X", "test.wa.nonullalign:2: link type 'X' is neither S nor P"),
    ("0001 one 1", r"test.wa.nonullalign:2: expected 'sentence e f \[S\|P\]'"),
])
def test_gold_reader_rejects_a_bad_link_naming_its_line(tmp_path, line, message):
    with pytest.raises(DataError, match=message):
        read_gold(write_gold(tmp_path, f"0001 1 1 S\n{line}\n"))


def test_gold_text_reader_names_a_malformed_line(tmp_path):
    path = tmp_path / "test.e"
    path.write_bytes(b"<s snum=0001> fine </s>\nno wrapper here\n")
    with pytest.raises(DataError, match=r"test.e:2: expected '<s snum=ID> tokens </s>'"):
        read_sentences(path)


def test_mapping_restores_contractions_elisions_and_hyphens_by_the_training_text():
    training = ["le rapport du comité", "afin de le faire", "l' heure", "peut-être pas",
                "c' est-à-dire", "de le faire"]
    counts = NgramCounts(training)
    [mapped] = map_corpus([["le", "rapport", "de", "le", "comité", "à", "le", "heure", "peut",
                            "-", "être", "de", "le", "faire", "ce", "est", "-", "à", "-", "dire"]],
                          "fr", False, counts)
    assert mapped.tokens == ("Le", "rapport", "du", "comité", "à", "l'", "heure", "peut-être",
                             "de", "le", "faire", "c'", "est-à-dire")
    assert mapped.cover[2] == (2, 3)               # du = de + le
    assert mapped.cover[5] == (6,) and mapped.cover[6] == (7,)
    assert mapped.cover[7] == (8, 9, 10)
    assert mapped.cover[8:11] == ((11,), (12,), (13,))   # "de le faire": le is a pronoun here
    assert mapped.cover[12] == (15, 16, 17, 18, 19)


def test_mapping_capitalises_the_first_word_or_lowercases_everything():
    counts = NgramCounts([])
    assert map_sentence(["i", "am", "Mr.", "Smith", "."], "en", False, counts).tokens == \
        ("I", "am", "Mr.", "Smith", ".")
    assert map_sentence(["i", "am", "Mr.", "Smith", "."], "en", True, counts).tokens == \
        ("i", "am", "mr.", "smith", ".")


class ScriptedModel:
    """``forward`` returns fixed attention: target word j attends to source position
    ``attend[j]`` (weight 0.7) and spreads 0.3 over the others."""

    def __init__(self, attend: list[int]) -> None:
        self.attend, self.calls = attend, []

    def __call__(self, src, src_len, tgt_in):
        self.calls.append((src.clone(), src_len.clone(), tgt_in.clone()))
        batch, steps, width = src.size(0), tgt_in.size(1), src.size(1)
        weights = torch.zeros(batch, steps, width)
        for b in range(batch):
            n = int(src_len[b])
            for j in range(steps):
                weights[b, j, :n] = 0.3 / max(n - 1, 1)
                weights[b, j, self.attend[j] % n] = 0.7
        return None, weights


def test_forced_decoding_alignments_pick_the_attended_positions():
    model = ScriptedModel([2, 0, 1, 1])
    [matrix] = forced_attention(model, [[5, 6, 7]], [[8, 9, 10]])
    src, src_len, tgt_in = model.calls[0]
    assert tgt_in.tolist() == [[BOS_ID, 8, 9, 10]] and src_len.tolist() == [3]   # teacher forcing
    assert matrix.shape == (3, 3)                  # </s> row left out
    assert argmax_links(matrix) == {(2, 0), (0, 1), (1, 2)}
    assert threshold_links(matrix, 0.15) == {(i, j) for i in range(3) for j in range(3)}
    assert threshold_links(matrix, 0.5) == argmax_links(matrix)


def test_forced_decoding_pads_a_batch_and_trims_each_matrix():
    model = ScriptedModel([0, 1, 0, 1])
    matrices = forced_attention(model, [[5, 6], [5, 6, 7, 8]], [[9], [9, 9, 9]], batch_size=8)
    src, _, tgt_in = model.calls[0]
    assert src[0].tolist() == [5, 6, PAD_ID, PAD_ID] and tgt_in[0].tolist() == [BOS_ID, 9, 0, 0]
    assert [m.shape for m in matrices] == [(1, 2), (3, 4)]


def tiny_tokenized(root: Path, src_lang: str, tgt_lang: str) -> None:
    """``data/tokenized/train.*`` and ``meta.json`` of a four-pair corpus."""
    (root / "tok").mkdir()
    (root / "tok/train.src").write_text("\n".join(e for e, _ in CORPUS) + "\n", encoding="utf-8")
    (root / "tok/train.tgt").write_text("\n".join(f for _, f in CORPUS) + "\n", encoding="utf-8")
    (root / "meta.json").write_text(f'{{"src_lang": "{src_lang}", "tgt_lang": "{tgt_lang}"}}')


def test_align_stage_without_gold_trains_and_says_why_there_is_no_aer(tmp_path):
    import json

    from conftest import run_script

    tiny_tokenized(tmp_path, "de", "en")
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    result = run_script("align.py", "--data", str(tmp_path / "tok"), "--meta",
                        str(tmp_path / "meta.json"), "--out", str(tmp_path / "align"),
                        "--links-out", str(tmp_path / "links"),
                        "--metrics", str(tmp_path / "align.json"), "--processes", "1", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((tmp_path / "align.json").read_text())
    assert metrics["gold"] == "no gold alignments for en-de (only English-French)"
    assert set(metrics["models"]) == {"ibm1", "fast_align", "fast_align_vb"}
    for model in metrics["models"].values():                                # 5 iterations + start
        assert [len(curve) for curve in model["log_likelihood"].values()] == [6, 6]
    assert json.loads((tmp_path / "align/gold.json").read_text()) == []
    result = run_script("align_attention.py", "--gold", str(tmp_path / "align/gold.json"),
                        "--meta", str(tmp_path / "meta.json"),
                        "--metrics", str(tmp_path / "attention.json"), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no gold alignments for de-en" in json.loads((tmp_path / "attention.json").read_text())["gold"]


def test_align_stage_refuses_a_bad_param_naming_it(tmp_path):
    import yaml

    from conftest import REPO, run_script

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["align"]["p_null"] = 1.5
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    tiny_tokenized(tmp_path, "en", "fr")
    result = run_script("align.py", "--params", str(tmp_path / "params.yaml"), "--data",
                        str(tmp_path / "tok"), "--meta", str(tmp_path / "meta.json"),
                        "--out", str(tmp_path / "align"), "--links-out", str(tmp_path / "links"),
                        "--metrics", str(tmp_path / "a.json"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == \
        "align: error: align.p_null: must be in (0, 1), got 1.5"
    assert not any((tmp_path / name).exists() for name in ("align", "links", "a.json"))


@pytest.mark.parametrize("source, attend, figure_links", [
    ("en", [2, 0, 1], [[1, 0], [2, 1], [0, 2]]),      # French word j attends English word i
    ("fr", [1, 2, 0], [[0, 1], [1, 2], [2, 0]]),      # English word j attends French word i
])
def test_attention_links_are_scored_as_english_french_whichever_side_is_the_source(
        source, attend, figure_links):
    """Gold links (en, fr) = (0, 1), (1, 2), (2, 0): a scripted model attending exactly there
    scores AER 0 in either translation direction, and the figure's links are [target, source]."""
    from collections import Counter

    from rnnsearch.alignment.corpus import GoldCorpus
    from rnnsearch.alignment.gold import GoldPair
    from rnnsearch.alignment.mapping import Mapped
    from rnnsearch.config.align import AlignConfig
    from rnnsearch.data.vocab import Vocabulary
    from rnnsearch.stages.align_attention import score_cell

    en, fr = ("a", "b", "c"), ("x", "y", "z")
    links = frozenset({(0, 1), (1, 2), (2, 0)})
    gold = GoldCorpus([GoldPair("1", en, fr, links, links)],
                      [Mapped(en, ((0,), (1,), (2,)))], [Mapped(fr, ((0,), (1,), (2,)))])
    words = {"en": en, "fr": fr}
    target = "fr" if source == "en" else "en"
    vocabs = {"src": Vocabulary.build(Counter(words[source]), 10),
              "tgt": Vocabulary.build(Counter(words[target]), 10)}
    result = score_cell(ScriptedModel(attend + [0]), gold, vocabs, source,
                        AlignConfig(figure_sentence="1"))
    assert result["scores"]["argmax"]["aer"] == 0.0
    counts = attention_counts(ScriptedModel(attend + [0]), gold, vocabs, source, 0.3)
    assert list(counts) == list(result["scores"])
    assert counts["argmax"].tolist() == [[3, 3, 3, 3]]     # |A|, |A∩S|, |A∩P|, |S|
    assert result["figure"]["source"] == list(words[source])
    assert sorted(result["figure"]["sure"]) == sorted(figure_links)


def test_a_figure_sentence_missing_from_the_gold_set_is_refused_naming_the_key(tmp_path):
    from rnnsearch.alignment.corpus import GoldCorpus
    from rnnsearch.alignment.gold import GoldPair
    from rnnsearch.alignment.mapping import Mapped
    from rnnsearch.stages.align_attention import check_figure_sentence
    from rnnsearch.errors import StageError

    words, links = ("a", "b"), frozenset({(0, 0), (1, 1)})
    pairs = [GoldPair(ident, words, words, links, links) for ident in ("1", "2", "3")]
    mapped = [Mapped(words, ((0,), (1,)))] * 3
    gold = GoldCorpus(pairs, mapped, mapped)
    check_figure_sentence(gold, "2", tmp_path / "gold.json")
    check_figure_sentence(gold, None, tmp_path / "gold.json")          # null: no overlay
    with pytest.raises(StageError, match=r"^align\.figure_sentence: .*gold\.json has no "
                                         r"sentence '109' \(its ids: 1 \.\.\. 3; null"):
        check_figure_sentence(gold, "109", tmp_path / "gold.json")


A_STAGE_WITH_A_POOL = """
import signal, threading, time
from rnnsearch.alignment.corpus import worker_pool

def interrupt(signum, frame):          # the stage runner's handler: SIGTERM as Ctrl-C
    raise KeyboardInterrupt

def task():
    # a second thread, as tqdm's monitor in an aligner's worker, takes the SIGTERM (the kernel
    # may give a signal to any thread); the main thread waits, as an idle worker for a task
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Event().wait()

signal.signal(signal.SIGTERM, interrupt)
pool = worker_pool(1)
pool.apply_async(task)
time.sleep(2)
pool.terminate()                       # SIGTERM to the worker, then wait for it
pool.join()
print("pool ended", flush=True)
"""


def test_the_aligners_pool_ends_whichever_thread_takes_its_sigterm():
    """The end of the aligners' pool (``Pool.terminate``: SIGTERM to the idle workers) ends
    workers forked from a stage (whose SIGTERM handler only the main thread runs) also when
    another thread takes the signal: the align stage once hung for ever there."""
    from conftest import REPO

    done = subprocess.run([sys.executable, "-c", A_STAGE_WITH_A_POOL], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["pool ended"]
