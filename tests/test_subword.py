"""Subword units (rnnsearch.data.subword): the tokenize stage with ``units: bpe | unigram``, the
pieces turned back into text by the translate stage and the translate CLI, and bad input.

The stages run as DVC runs them (``pipeline/<script>``) on prepared text written here from the
Multi30k mirror (de -> en): the first 1,000 training pairs, 100 dev pairs and the whole
test_2016_flickr test set (1,000 pairs), whose references the round trip reads.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SHARED_CORPORA, run_script

from rnnsearch.data.subword import (BOUNDARY, MANIFEST, TextUnits, letter_counts,
                                    pieces_to_words, shared_letters, unseen_characters,
                                    word_lengths, word_split_stats)
from rnnsearch.data.tokenize import count_words, detokenize, tokenize_lines
from rnnsearch.data.vocab import SPECIALS, Vocabulary

SOURCES = {"train": ("train", 1000), "dev": ("val", 100), "test": ("test_2016_flickr", 1000)}
LANGS = {"src": "de", "tgt": "en"}
SUBWORD = {"units": "bpe", "vocab_size_src": 800, "vocab_size_tgt": 600}
CYRILLIC = str.maketrans("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                         "абцдефгхийклмнопярстуввхызАБЦДЕФГХИЙКЛМНОПЯРСТУВВХЫЗ")


def write_prepared(root: Path, mirror: Path, tgt_map: dict[int, str] | None = None) -> Path:
    """``root/data/prepared`` as the prepare stage writes it: ``meta.json`` and one file per
    split and side (the target side's letters mapped through ``tgt_map`` if given)."""
    prepared = root / "data" / "prepared"
    prepared.mkdir(parents=True)
    for split, (name, size) in SOURCES.items():
        for side, lang in LANGS.items():
            with gzip.open(mirror / "multi30k" / f"{name}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [line.strip() for _, line in zip(range(size), f)]
            if side == "tgt" and tgt_map:
                lines = [line.translate(tgt_map) for line in lines]
            (prepared / f"{split}.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (prepared / "meta.json").write_text(json.dumps({"src_lang": "de", "tgt_lang": "en"}))
    return root


def write_params(root: Path, **tokenize) -> None:
    """The repository's params.yaml with de -> en and ``tokenize`` merged over its section."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["prepare"].update(corpus="multi30k", src_lang="de", tgt_lang="en")
    subword = {**params["tokenize"].get("subword", {}), **tokenize.pop("subword", {})}
    params["tokenize"].update(tokenize, subword=subword)
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")


def tokenize_in(root: Path, mirror: Path, tgt_map: dict[int, str] | None = None, **tokenize
                ) -> subprocess.CompletedProcess:
    """Prepared text and params in ``root``, then the tokenize stage there."""
    write_prepared(root, mirror, tgt_map)
    write_params(root, **tokenize)
    return run_script("tokenize_text.py", cwd=root)


def file_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def assert_failed_cleanly(result: subprocess.CompletedProcess, message: str, root: Path,
                          outputs: tuple[str, ...]) -> None:
    """Exit 2, one error line (the last on stderr, after any progress bars) containing
    ``message``, no traceback, none of ``outputs`` written."""
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert errors == result.stderr.strip().splitlines()[-1:], result.stderr
    assert message in errors[0] and "Traceback" not in result.stderr, result.stderr
    assert not [name for name in outputs if (root / name).exists()]


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory) -> Path:
    """A tokenize run with separate BPE models (800 source, 600 target pieces)."""
    if not SHARED_CORPORA.is_dir():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    root = tmp_path_factory.mktemp("bpe")
    result = tokenize_in(root, SHARED_CORPORA, **SUBWORD)
    assert result.returncode == 0, result.stderr
    return root


# --- pieces and words, by hand ---------------------------------------------------------------

def test_pieces_join_into_words_and_count_per_word():
    pieces = ["▁Ein", "▁Bo", "st", "on", "▁T", "err", "ier", "▁.", "▁", "im"]
    assert pieces_to_words(pieces) == ["Ein", "Boston", "Terrier", ".", "im"]
    assert word_lengths(pieces) == [1, 3, 3, 1, 2]
    assert word_split_stats([" ".join(pieces)]) == {"pieces_per_word": 2.0, "words_split": 0.6}
    # A model may emit a continuation first, or a lone word mark before another word.
    assert pieces_to_words(["s", "▁Haus", "▁", "▁."]) == ["s", "Haus", "."]


def test_unseen_characters_and_shared_letters():
    vocab = Vocabulary(SPECIALS + ("▁a", "b"), (0,) * 6)
    assert unseen_characters(["▁a b ▁ xyz"], vocab) == pytest.approx(3 / 5)
    latin, cyrillic = letter_counts(["ab ab ."]), letter_counts(["аб аб ab ."])
    assert shared_letters(latin, latin) == 1.0
    # The Latin name in the Cyrillic text covers all of the Latin side, 2 of 6 Cyrillic-side letters.
    assert shared_letters(latin, cyrillic) == pytest.approx(2 / 6)


# --- the tokenize stage ----------------------------------------------------------------------

def test_bpe_outputs_and_metrics(bpe_run):
    tokenized = bpe_run / "data" / "tokenized"
    assert json.loads((tokenized / MANIFEST).read_text()) == {
        "units": "bpe", "joint": False,
        "models": {"src": "subword.src.model", "tgt": "subword.tgt.model"}}
    units = TextUnits.read(tokenized)
    assert units.subwords and units.units == "bpe"
    for side, size in (("src", 800), ("tgt", 600)):
        vocab = Vocabulary.load(tokenized / f"vocab.{side}.txt")
        assert len(vocab) == size and vocab.words[:4] == SPECIALS
        assert all(BOUNDARY not in w[1:] for w in vocab.words[4:])   # a mark only starts a piece
    metrics = json.loads((bpe_run / "metrics" / "tokenize.json").read_text())
    assert metrics["vocab_size"] == {"src": 800, "tgt": 600}
    assert (metrics["subword"]["units"], metrics["subword"]["joint"]) == ("bpe", False)
    train_src = metrics["subword"]["segmentation"]["train"]["src"]
    assert train_src["pieces_per_word"] > 1 and 0 < train_src["words_split"] < 1
    assert train_src["unseen_characters"] == 0        # character_coverage 1: every one seen
    assert metrics["length"]["test"]["src"]["p50"] > 0   # in pieces


@pytest.mark.parametrize("settings", [
    SUBWORD,
    {"units": "unigram", "vocab_size_src": 500, "vocab_size_tgt": 500,
     "subword": {"joint": True, "seed": 7}},
])
def test_same_params_same_models_and_tokens(bpe_run, tmp_path_factory, mirror, settings):
    runs = [] if settings is SUBWORD else [tmp_path_factory.mktemp("first")]
    for root in runs:
        assert tokenize_in(root, mirror, **settings).returncode == 0
    again = tmp_path_factory.mktemp("again")
    assert tokenize_in(again, mirror, **settings).returncode == 0
    first = (runs[0] if runs else bpe_run) / "data" / "tokenized"
    assert file_bytes(again / "data" / "tokenized") == file_bytes(first)
    if runs:
        assert sorted(p.name for p in first.glob("*.model")) == ["subword.joint.model"]


def test_pieces_back_to_text_round_trip_over_test_references(bpe_run):
    """Every reference of the test split: its pieces join back into its Moses tokens and text
    (0 mismatches). Through the vocabulary's ids (what a model can emit) a reference changes only
    where it holds a character the model never saw, which comes back as <unk>."""
    tokenized, prepared = bpe_run / "data" / "tokenized", bpe_run / "data" / "prepared"
    raw = (prepared / "test.tgt").read_text(encoding="utf-8").splitlines()
    moses = [line.split() for line in tokenize_lines(raw, "en", workers=1)]
    pieces = [line.split() for line in (tokenized / "test.tgt").read_text().splitlines()]
    units = TextUnits.read(tokenized)
    assert len(pieces) == len(moses) == 1000
    assert [i for i, (p, m) in enumerate(zip(pieces, moses)) if pieces_to_words(p) != m] == []
    assert [i for i, (p, m) in enumerate(zip(pieces, moses))
            if units.text(p, "en") != detokenize(m, "en")] == []
    vocab = Vocabulary.load(tokenized / "vocab.tgt.txt")
    through_ids = [i for i, p in enumerate(pieces) if vocab.decode(vocab.encode(p)) != p]
    assert through_ids == [i for i, p in enumerate(pieces) if any(x not in vocab for x in p)]


def test_word_units_write_what_the_word_code_path_writes(tmp_path, mirror):
    """``units: word`` (with the subword keys present) writes the same files, byte for byte, as
    Moses tokens and a most-frequent-words vocabulary built directly, and nothing else."""
    result = tokenize_in(tmp_path, mirror, units="word", vocab_size_src=900, vocab_size_tgt=700,
                         subword={"joint": True})
    assert result.returncode == 0, result.stderr
    expected: dict[str, bytes] = {}
    for side, size in (("src", 900), ("tgt", 700)):
        for split in SOURCES:
            raw = (tmp_path / "data/prepared" / f"{split}.{side}").read_text().splitlines()
            lines = tokenize_lines(raw, LANGS[side], workers=1)
            expected[f"{split}.{side}"] = ("\n".join(lines) + "\n").encode()
            if split == "train":
                vocab = Vocabulary.build(count_words(lines), size)
                vocab.save(tmp_path / f"vocab.{side}.txt")
                expected[f"vocab.{side}.txt"] = (tmp_path / f"vocab.{side}.txt").read_bytes()
    assert file_bytes(tmp_path / "data" / "tokenized") == dict(sorted(expected.items()))
    assert "subword" not in json.loads((tmp_path / "metrics" / "tokenize.json").read_text())
    assert not TextUnits.read(tmp_path / "data" / "tokenized").subwords


# --- bad input -------------------------------------------------------------------------------

TOKENIZE_OUTPUTS = ("data/tokenized", "metrics/tokenize.json", "plots/lengths.csv")


@pytest.mark.parametrize("settings, tgt_map, message", [
    ({"units": "sentencepiece"}, None,
     "tokenize.units: must be one of ['word', 'bpe', 'unigram'], got 'sentencepiece'"),
    ({**SUBWORD, "vocab_size_tgt": 60000}, None,
     "tokenize.vocab_size_tgt: Vocabulary size too high (60000)"),
    ({**SUBWORD, "vocab_size_src": 40}, None,
     "tokenize.vocab_size_src: Vocabulary size is smaller than required_chars"),
    ({**SUBWORD, "vocab_size_tgt": 800, "subword": {"joint": True}}, CYRILLIC,
     "tokenize.subword.joint: the de and en training text share"),
    ({**SUBWORD, "subword": {"joint": True}}, None,
     "tokenize.vocab_size_tgt: a joint model (tokenize.subword.joint) has one vocabulary"),
    ({**SUBWORD, "subword": {"character_coverage": 0}}, None,
     "tokenize.subword.character_coverage: must be in (0, 1], got 0"),
])
def test_bad_tokenize_params_fail_in_one_line(tmp_path, mirror, settings, tgt_map, message):
    result = tokenize_in(tmp_path, mirror, tgt_map, **settings)
    assert_failed_cleanly(result, message, tmp_path, TOKENIZE_OUTPUTS)


def translate_workspace(bpe_run: Path, root: Path) -> Path:
    """``root`` with the BPE run's params and data/tokenized, and an untrained tiny model."""
    from rnnsearch.config.model import ModelConfig
    from rnnsearch.models.seq2seq import build_model, save_model

    shutil.copy(bpe_run / "params.yaml", root / "params.yaml")
    shutil.copytree(bpe_run / "data" / "tokenized", root / "data" / "tokenized")
    config = ModelConfig(model="search", embedding_size=8, hidden_size=8, attention_size=8,
                         output_size=8)
    save_model(build_model(config, 800, 600), root / "data/models/search-50/model.pt")
    return root


def run_cli(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The translate CLI (``python -m rnnsearch.decoding.cli``) in ``root``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-m", "rnnsearch.decoding.cli", "--model",
                           "data/models/search-50/model.pt", "--device", "cpu", *args],
                          cwd=root, env=env, input=stdin, capture_output=True, text=True,
                          timeout=300)


def test_translate_cli_takes_raw_text_and_prints_text(bpe_run, tmp_path):
    """Raw German in, one line of text per input line out; the source the model read is the
    tokenize stage's pieces of the same sentence."""
    root = translate_workspace(bpe_run, tmp_path)
    raw = (bpe_run / "data/prepared/test.src").read_text(encoding="utf-8").splitlines()[:2]
    result = run_cli(root, "--method", "greedy", stdin="\n".join([raw[0], "", raw[1]]) + "\n")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 3 and BOUNDARY not in result.stdout
    aligned = run_cli(root, "--method", "greedy", "--align", stdin=raw[0] + "\n")
    source = aligned.stdout.splitlines()[1].removeprefix("source: ").split()
    expected = (bpe_run / "data/tokenized/test.src").read_text(encoding="utf-8").splitlines()[0]
    assert [label.split(":", 1)[1] for label in source][:len(expected.split())] == expected.split()


@pytest.mark.parametrize("damage, message", [
    ("missing", "subword.tgt.model: subword model not found"),
    ("stale", "subword.tgt.model: does not match"),
])
def test_subword_model_missing_or_stale_at_translate_time(bpe_run, tmp_path, damage, message):
    root = translate_workspace(bpe_run, tmp_path)
    tokenized = root / "data" / "tokenized"
    if damage == "missing":
        (tokenized / "subword.tgt.model").unlink()
    else:
        shutil.copy(tokenized / "subword.src.model", tokenized / "subword.tgt.model")
    stage = run_script("translate.py", "--cell", "search-50", cwd=root)
    assert_failed_cleanly(stage, message, root, ("data/translations", "metrics"))
    cli = run_cli(root, stdin="Ein Hund .\n")
    assert cli.returncode == 2 and message in cli.stderr and cli.stdout == ""


# --- later stages on pieces ------------------------------------------------------------------

def test_embed_on_pieces_scores_words_as_the_mean_of_their_pieces(bpe_run, tmp_path):
    """word2vec learns the pieces; the English side's word similarity says how its words got
    vectors and how many had one, and probe words find neighbours through their pieces."""
    shutil.copy(bpe_run / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(bpe_run / "data" / "tokenized", tmp_path / "data" / "tokenized")
    shutil.copytree(bpe_run / "data" / "prepared", tmp_path / "data" / "prepared")
    result = run_script("embed.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    english = json.loads((tmp_path / "metrics" / "embed.json").read_text())["tgt"]
    words = english["similarity_words"]
    assert words["vector"] == "mean of its pieces' vectors"
    assert 0 < words["split"] <= words["with_vector"] <= words["words"]
    assert english["wordsim353"]["pairs"] > 0 and english["wordsim353"]["oov_ratio"] < 1
    neighbours = (tmp_path / "data" / "embed" / "neighbours.tsv").read_text().splitlines()
    assert any(row.split("\t")[:3] == ["tgt", "en", "man"] for row in neighbours)


def test_translate_on_pieces_skips_unk_replacement_and_says_so(bpe_run, tmp_path):
    root = translate_workspace(bpe_run, tmp_path)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["translate"].update(max_sentences=8, speed_sentences=0, unk_replace=True,
                               search={**params["translate"]["search"], "max_len_b": 5})
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    result = run_script("translate.py", "--cell", "search-50", cwd=root)
    assert result.returncode == 0, result.stderr
    out = root / "data" / "translations" / "search-50"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["systems"] == ["greedy", "beam"] and not list(out.glob("*_unk.*"))
    assert meta["unk_replace"].startswith("skipped: bpe units spell rare words in pieces")
    samples = json.loads((root / "metrics/alignments/search-50.json").read_text())["samples"]
    tokenized = (root / "data/tokenized/test.src").read_text().splitlines()
    pieces = Vocabulary.load(root / "data/tokenized/vocab.tgt.txt")
    assert samples
    for sample in samples:        # Figure 3 shows the pieces the model read and wrote
        assert sample["source"] == tokenized[sample["index"]].split()
        assert all(w in pieces for w in sample["target"])
