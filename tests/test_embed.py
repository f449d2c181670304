"""The embed stage: word2vec options reach gensim, vocabulary alignment, evaluation, the script."""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors, Word2Vec

from rnnsearch.config.embed import EmbedConfig, ProbeWords
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.embeddings.evaluation import nearest_neighbours, pca_2d, word_similarity
from rnnsearch.embeddings.word2vec import vocab_arrays
from rnnsearch.stages import embed
from rnnsearch.stages.embed import embed_corpus
from rnnsearch.stages.runner import run

REPO = Path(__file__).resolve().parents[1]
EN = "the a man dog cat sees runs red big water street tiger love sex book paper".split()
FR = "le un homme chien chat voit court rouge grand eau rue tigre amour livre papier".split()


@pytest.fixture
def tokenized(tmp_path: Path) -> Path:
    """train.{src,tgt} of random sentences; vocabularies that include a word never seen."""
    rng = random.Random(0)
    for side, words in (("src", EN), ("tgt", FR)):
        lines = [" ".join(rng.choices(words, k=rng.randint(4, 10))) for _ in range(300)]
        (tmp_path / f"train.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        counts = Counter(" ".join(lines).split()) + Counter({"unseen": 1})
        Vocabulary.build(counts, 100).save(tmp_path / f"vocab.{side}.txt")
    return tmp_path


def embed_main(*args: str) -> int:
    """Run the embed stage in this process (a subprocess would import the stack again)."""
    return run(embed.STAGE, list(args))


def small_config(**overrides) -> EmbedConfig:
    settings = dict(vector_size=8, epochs=2, min_count=1, plot_words=10, neighbours=3,
                    probes=ProbeWords(en=("man", "nonword"), fr=("homme",)))
    return EmbedConfig(**{**settings, **overrides})


@pytest.mark.parametrize("sg, flag", [("skipgram", 1), ("cbow", 0)])
def test_architecture_and_negative_sampling_reach_gensim(tokenized, tmp_path, sg, flag):
    out = tmp_path / "out"
    out.mkdir()
    cfg = small_config(sg=sg, negative=3, ns_exponent=0.5, window=2)
    embed_corpus(cfg, tokenized, out, {"src": "en", "tgt": "fr"})
    for side in ("src", "tgt"):
        model = Word2Vec.load(str(out / f"{side}.w2v.model"))
        assert (model.sg, model.negative, model.hs) == (flag, 3, 0)
        assert (model.ns_exponent, model.window, model.vector_size) == (0.5, 2, 8)
        assert KeyedVectors.load(str(out / f"{side}.kv")).vector_size == 8


def test_vocab_arrays_follow_vocabulary_order(tokenized):
    vocab = Vocabulary.load(tokenized / "vocab.src.txt")
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["dog", "man", "zebra"], np.arange(9, dtype=np.float32).reshape(3, 3))
    vectors, mask = vocab_arrays(kv, vocab)
    assert vectors.shape == (len(vocab), 3) and vectors.dtype == np.float32
    assert mask.tolist() == [w in ("dog", "man") for w in vocab.words]
    assert vectors[vocab.ids["man"]].tolist() == [3.0, 4.0, 5.0]
    assert not vectors[~mask].any()


def test_evaluation_helpers():
    kv = KeyedVectors(vector_size=2)
    kv.add_vectors(["tiger", "cat", "love", "sex"],
                   np.array([[1, 0], [0.9, 0.1], [0, 1], [0.2, 1]], dtype=np.float32))
    scores = word_similarity(kv)
    assert set(scores) == {"wordsim353", "simlex999"}
    assert 0.95 < scores["wordsim353"]["oov_ratio"] < 1.0 and scores["wordsim353"]["pairs"] >= 2
    rows = nearest_neighbours(kv, ["tiger", "absent"], 2)
    assert [r["neighbour"] for r in rows] == ["cat", "sex"] and rows[0]["probe"] == "tiger"
    points = pca_2d(np.array([[0, 0, 0], [2, 0, 0], [4, 0, 1]], dtype=np.float64))
    assert points.shape == (3, 2) and abs(points[:, 0]).max() == pytest.approx(2.0, abs=0.3)


def test_a_corpus_of_one_word_gets_a_one_point_figure_and_says_so(tmp_path, capsys):
    """Was: an IndexError in the PCA figure (one vector has no second principal component)."""
    for side, word in (("src", "man"), ("tgt", "homme")):
        (tmp_path / f"train.{side}").write_text(f"{word} {word} {word}\n" * 50, encoding="utf-8")
        Vocabulary.build(Counter({word: 150}), 100).save(tmp_path / f"vocab.{side}.txt")
    out = tmp_path / "out"
    out.mkdir()
    result = embed_corpus(small_config(), tmp_path, out, {"src": "en", "tgt": "fr"})
    assert sorted(result.figures) == ["src", "tgt"]
    said = [line for line in capsys.readouterr().out.splitlines() if "PCA" in line]
    assert said == [f"embed: {lang} ({side}): one word has a vector, so its PCA figure is a "
                    f"single point" for side, lang in (("src", "en"), ("tgt", "fr"))]
    assert pca_2d(np.ones((1, 8))).tolist() == [[0.0, 0.0]]


def test_embed_script_writes_outputs_and_metrics(tokenized, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("embed:\n  vector_size: 8\n  epochs: 1\n  min_count: 1\n  plot_words: 10\n")
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"src_lang": "en", "tgt_lang": "fr"}))
    out, metrics = tmp_path / "embed", tmp_path / "metrics" / "embed.json"
    assert embed_main("--params", str(params), "--data", str(tokenized), "--meta", str(meta),
                      "--out", str(out), "--metrics", str(metrics)) == 0
    scores = json.loads(metrics.read_text())
    words = len(Vocabulary.load(tokenized / "vocab.src.txt")) - len(SPECIALS)
    assert scores["src"]["coverage"] == pytest.approx((words - 1) / words)  # all but "unseen"
    assert "wordsim353" in scores["src"] and "wordsim353" not in scores["tgt"]
    assert (out / "neighbours.tsv").read_text().startswith("side\tlang\tprobe")
    assert np.load(out / "tgt.mask.npy").dtype == np.bool_


def test_embed_script_fails_cleanly_on_a_bad_param(tokenized, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("embed:\n  sg: glove\n")
    assert embed_main("--params", str(params), "--data", str(tokenized), "--meta",
                      str(tmp_path / "meta.json"), "--out", str(tmp_path / "e")) == 2
    assert "embed.sg" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_embed_outputs_are_byte_identical_across_runs(tokenized, tmp_path):
    """Same params and seed, same files: gensim's lifecycle timestamps are not saved (DVC would
    otherwise see a new data/embed each run and rerun what depends on it)."""
    params = tmp_path / "params.yaml"
    params.write_text("embed:\n  vector_size: 8\n  epochs: 1\n  min_count: 1\n  plot_words: 10\n")
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"src_lang": "en", "tgt_lang": "fr"}))
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert embed_main("--params", str(params), "--data", str(tokenized), "--meta", str(meta),
                          "--out", str(out), "--metrics", str(tmp_path / f"{name}.json")) == 0
        runs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert runs[0].keys() == runs[1].keys() and "src.kv" in runs[0] and "tgt.w2v.model" in runs[0]
    assert runs[0] == runs[1]
