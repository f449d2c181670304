"""The senses stage: k-means with a silhouette choice of k, relabelling by context, the stage
end to end on a tiny corpus, bad params, and the report's table and figure."""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

from conftest import run_script
from rnnsearch.config.base import load_section
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.config.senses import SensesConfig
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.embeddings.senses import (cluster_points, find_occurrences, relabel, sample_rows,
                                         split_word)
from rnnsearch.reporting.senses import senses_figure, senses_table
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.stages import senses
from rnnsearch.stages.embed import embed_corpus
from rnnsearch.stages.runner import run

RIVER = "river water boat fish shore muddy flowed grass".split()
MONEY = "money loan interest account deposit cash paid credit".split()
FILLER = "the a of and was on".split()


def blobs(n: int = 60, seed: int = 0) -> np.ndarray:
    """Two tight clusters of unit vectors in 8 dimensions, shuffled."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[:2]
    points = np.concatenate([c + 0.05 * rng.standard_normal((n, 8)) for c in centres])
    rng.shuffle(points)
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def test_silhouette_picks_two_clusters_reproducibly():
    points = blobs()
    first = cluster_points(points, (2, 3, 4), seed=7, cap=1000)
    again = cluster_points(points, (2, 3, 4), seed=7, cap=1000)
    assert first.k == 2 and first.chosen_by == "silhouette"
    assert first.silhouette[2] > max(first.silhouette[3], first.silhouette[4])
    assert np.array_equal(first.labels, again.labels) and first.silhouette == again.silhouette
    assert np.bincount(first.labels).tolist() == [60, 60]


def test_a_capped_sample_still_labels_every_point():
    points = blobs()
    clustering = cluster_points(points, (2,), seed=7, cap=30)
    assert clustering.clustered == 30 and clustering.chosen_by == "fixed"
    assert len(clustering.labels) == 120 and np.bincount(clustering.labels).tolist() == [60, 60]
    assert sample_rows(120, 30, 7).tolist() == sample_rows(120, 30, 7).tolist()


def toy_corpus(n: int = 200, seed: int = 0) -> list[list[str]]:
    """``bank`` among river words in even sentences, among money words in odd ones."""
    rng = random.Random(seed)
    sentences = []
    for i in range(n):
        topic = RIVER if i % 2 == 0 else MONEY
        words = rng.sample(topic, 4) + rng.sample(FILLER, 2)
        words.insert(rng.randint(0, len(words)), "bank")
        sentences.append(words)
    return sentences


def toy_vectors() -> KeyedVectors:
    """River words near one axis, money words near another, filler words random."""
    rng = np.random.default_rng(0)
    kv = KeyedVectors(vector_size=8)
    words = RIVER + MONEY + FILLER
    axes = [0] * len(RIVER) + [1] * len(MONEY) + [None] * len(FILLER)
    vectors = [(np.eye(8)[a] if a is not None else 0) + 0.1 * rng.standard_normal(8)
               for a in axes]
    kv.add_vectors(words, np.array(vectors, dtype=np.float32))
    return kv


def test_relabelling_separates_the_river_bank_from_the_money_bank():
    sentences = toy_corpus()
    positions = find_occurrences(sentences, ["bank"])["bank"]
    cfg = SensesConfig(min_occurrences=10, window=3)
    split = split_word(sentences, "bank", positions, toy_vectors(), cfg)
    assert split.clustering.k == 2
    river = {int(s) for (i, _), s in zip(split.positions, split.senses) if i % 2 == 0}
    money = {int(s) for (i, _), s in zip(split.positions, split.senses) if i % 2 == 1}
    assert len(river) == 1 and len(money) == 1 and river != money
    typical = dict(zip(split.labels, split.contexts))
    assert set(typical[f"bank_{river.pop() + 1}"]) <= set(RIVER)
    relabelled = relabel(sentences, [split])
    assert all("bank" not in s for s in relabelled) and "bank" in sentences[0]
    assert sum(s.count("bank_1") + s.count("bank_2") for s in relabelled) == len(positions)


def test_relabel_shares_untouched_sentences():
    sentences = toy_corpus(40) + [["no", "match"]]
    positions = find_occurrences(sentences, ["bank"])["bank"]
    split = split_word(sentences, "bank", positions, toy_vectors(),
                       SensesConfig(min_occurrences=10, k=2, window=3))
    out = relabel(sentences, [split])
    assert out[-1] is sentences[-1] and out[0] is not sentences[0]
    assert split.clustering.chosen_by == "fixed" and split.clustering.k == 2


@pytest.mark.parametrize("text, key", [("k: 1", "senses.k"), ("k: -2", "senses.k"),
                                       ("max_k: 1", "senses.max_k"),
                                       ("window: 0", "senses.window"),
                                       ("colour: red", "senses.colour"),
                                       ("min_occurrences: 3", "senses.min_occurrences"),
                                       ("seed: -1", "senses.seed")])
def test_bad_params_fail_naming_the_key(tmp_path, capsys, text, key):
    params = tmp_path / "params.yaml"
    params.write_text(f"embed: {{}}\nsenses:\n  {text}\n")
    assert run(senses.STAGE, ["--params", str(params), "--out", str(tmp_path / "s"),
                              "--metrics", str(tmp_path / "m.json")]) == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def write_project(root: Path, en: list[str], params_text: str) -> dict[str, Path]:
    """A tokenised corpus in ``root`` (``en`` as source, filler as French target), meta.json,
    params (``params_text``), and the embed stage's vectors of it."""
    data = root / "tokenized"
    data.mkdir()
    fr = [" ".join(random.Random(i).sample(FILLER, 4)) for i in range(len(en))]
    for side, lines in (("src", en), ("tgt", fr)):
        (data / f"train.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        Vocabulary.build(Counter(" ".join(lines).split()), 100).save(data / f"vocab.{side}.txt")
    meta = root / "meta.json"
    meta.write_text(json.dumps({"src_lang": "en", "tgt_lang": "fr"}))
    params = root / "params.yaml"
    params.write_text(params_text)
    paths = {"data": data, "meta": meta, "params": params, "embed": root / "embed"}
    paths["embed"].mkdir()
    embed_corpus(load_section(EmbedConfig, "embed", params), data, paths["embed"],
                 {"src": "en", "tgt": "fr"})
    return paths


@pytest.fixture
def tiny_project(tmp_path: Path) -> dict[str, Path]:
    """The toy corpus (en: the two banks; fr: filler) as a project with the embed stage's
    vectors."""
    en = [" ".join(s) for s in toy_corpus(300)] + ["a lonely heron"]
    return write_project(tmp_path, en, "embed:\n  vector_size: 16\n  epochs: 3\n  min_count: 1\n"
                         "  plot_words: 10\nsenses:\n  words: {en: [bank, absent, heron], fr: []}\n"
                         "  min_occurrences: 20\n  neighbours: 3\n")


def run_senses(paths: dict[str, Path], out: Path, metrics: Path) -> int:
    return run(senses.STAGE, ["--params", str(paths["params"]), "--data", str(paths["data"]),
                              "--embed", str(paths["embed"]), "--meta", str(paths["meta"]),
                              "--out", str(out), "--metrics", str(metrics)])


def test_stage_end_to_end_writes_sense_sizes_reproducibly(tiny_project, tmp_path, capsys):
    """One stage run, checked; the report's table and figure of it; a rerun, identical."""
    metrics = tmp_path / "metrics" / "senses.json"
    assert run_senses(tiny_project, tmp_path / "senses", metrics) == 0
    result = json.loads(metrics.read_text())
    bank = result["src"]["words"]["bank"]
    assert sum(s["size"] for s in bank["senses"]) == bank["occurrences"] == 300
    assert bank["k"] == len(bank["senses"]) and set(bank["silhouette"]) == {"2", "3", "4"}
    assert len(bank["single_neighbours"]) == 3 and all(len(s["neighbours"]) == 3
                                                       for s in bank["senses"])
    assert result["src"]["skipped"] == {
        "absent": "0 occurrences (< senses.min_occurrences 20)",
        "heron": "1 occurrences (< senses.min_occurrences 20)"}
    assert result["tgt"] == {"lang": "fr", "retrained": False, "words": {}, "skipped": {}}
    assert "'absent' skipped: 0 occurrences" in capsys.readouterr().out
    kv = KeyedVectors.load(str(tmp_path / "senses" / "src.kv"))
    assert "bank_1" in kv.key_to_index and "bank" not in kv.key_to_index
    assert not (tmp_path / "senses" / "tgt.kv").exists()
    check_report(tmp_path / "metrics")
    assert run_senses(tiny_project, tmp_path / "again", tmp_path / "again.json") == 0
    rerun = json.loads((tmp_path / "again.json").read_text())
    assert rerun["src"] == result["src"]
    for name in ("src.kv", "src.senses.tsv"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "senses" / name).read_bytes()


def check_report(metrics: Path) -> None:
    """The report's word-sense table and figure from the stage's metrics file."""
    inputs = ReportInputs.load(metrics)
    table = senses_table(inputs.senses)
    assert table.rows[0][:3] == ("en", "bank", "single vector")
    assert [row[2] for row in table.rows[1:]] == [f"bank_{i + 1}"
                                                  for i in range(len(table.rows) - 1)]
    assert any("'heron' not split" in note for note in table.notes)
    assert senses_figure(inputs.senses) is not None
    assert ReportInputs.load(metrics / "absent").senses is None


def topic_sentences(words: list[str], n: int, with_bank: int, rng: random.Random) -> list[str]:
    """``n`` sentences of all of ``words`` (shuffled) and one filler word; the first
    ``with_bank`` of them hold ``bank`` too."""
    sentences = []
    for i in range(n):
        tokens = rng.sample(words, len(words)) + [FILLER[i % len(FILLER)]]
        if i < with_bank:
            tokens.insert(rng.randint(0, len(tokens)), "bank")
        sentences.append(" ".join(tokens))
    return sentences


@pytest.mark.parametrize("k, max_k", [(0, 3), (3, 4)])
def test_a_sense_rarer_than_embed_min_count_is_not_a_crash(tmp_path, k, max_k):
    """Was: ``KeyError: "Key 'bank_3' not present in vocabulary"``: a sense of 10 occurrences
    under ``embed.min_count: 20`` got no vector from the retrained word2vec. Now a k that leaves
    such a sense is not chosen (recorded in the metrics and the report's notes), and a word
    whose every k does is skipped, saying why."""
    rng = random.Random(0)
    en = (topic_sentences(RIVER[:4], 150, 150, rng) + topic_sentences(MONEY[:4], 150, 150, rng)
          + topic_sentences(["heron", "egret", "stork", "gull"], 40, 10, rng))
    paths = write_project(tmp_path, en, "embed:\n  vector_size: 16\n  epochs: 3\n"
                          "  min_count: 20\n  plot_words: 10\nsenses:\n  words: {en: [bank]}\n"
                          f"  k: {k}\n  max_k: {max_k}\n  min_occurrences: 20\n  neighbours: 3\n")
    result = run_script("senses.py", "--params", str(paths["params"]), "--data",
                        str(paths["data"]), "--embed", str(paths["embed"]), "--meta",
                        str(paths["meta"]), "--out", "senses", "--metrics", "metrics/senses.json",
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    side = json.loads((tmp_path / "metrics/senses.json").read_text())["src"]
    notes = " ".join(senses_table(ReportInputs.load(tmp_path / "metrics").senses).notes)
    if k == 0:
        bank = side["words"]["bank"]
        assert bank["k"] == 2 and bank["too_rare"] == {"3": [150, 150, 10]}
        assert bank["min_sense_size"] == 20 and "3" in bank["silhouette"]
        assert "k = 3 not chosen: a sense of 10 occurrences, under embed.min_count 20" in notes
    else:
        why = side["skipped"]["bank"]
        assert why.startswith("a sense under embed.min_count 20 for every k tried (k = 3: "
                              "150/150/10)"), why
        assert f"'bank' skipped: {why}" in result.stdout and f"'bank' not split: {why}" in notes
        assert not (tmp_path / "senses/src.kv").exists()


def test_a_word_held_only_in_pieces_says_so():
    """Was: 'bank' not split: 0 occurrences, for a word in 85 training lines of a BPE run (the
    text holds it as pieces). The reason now gives its count as a word, pieces joined back."""
    from rnnsearch.stages.senses import in_pieces

    sentences = [["▁the", "▁ba", "nk", "▁is", "▁open"], ["▁a", "▁bank"], ["▁ba", "nk", "s"]]
    found = {"bank": [], "open": [], "river": []}   # no unit is the bare word: pieces carry ▁
    reasons = in_pieces(sentences, found, "bpe")
    assert reasons == {word: f"; the text holds it in bpe pieces, {n} times as a word (pieces "
                             f"joined back), and word2vec learns the pieces' vectors "
                             f"(tokenize.units: bpe)"
                       for word, n in (("bank", 2), ("open", 1))}
    assert in_pieces(sentences, found, "word") == {}
