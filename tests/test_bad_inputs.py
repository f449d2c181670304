"""Bad inputs end in one line naming the params key or the file, exit status 2, no traceback and
no (half-)written output; inputs that used to be taken silently wrong are refused or repaired.

Each case runs the real entry point (``pipeline/<stage>.py`` or ``python -m
rnnsearch.decoding.cli``) in a subprocess on tiny inputs under ``tmp_path``; a few library-level
checks sit beside them. Params variants that fail at load are parametrized, so no case trains or
decodes anything.
"""
from __future__ import annotations

import gzip
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from conftest import REPO, run_script
from test_report import _eval
from rnnsearch.config.base import from_dict, read_params
from rnnsearch.errors import ConfigError, DataError
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.config.evaluate import EvaluateConfig, check_baseline
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.config.train import GridConfig, TrainConfig, TrainerConfig
from rnnsearch.data.clean import CleanRules, clean_pairs
from rnnsearch.data.textio import read_lines
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.embeddings.loading import read_vector_rows
from rnnsearch.evaluation.scores import corpus_scores
from rnnsearch.models.lm_transfer import read_decoder_init
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.seq2seq import build_model, load_model, save_model
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.stages import train as train_stage
from rnnsearch.stages.runner import run as run_stage

TINY_MODEL = {"embedding_size": 8, "hidden_size": 8, "attention_size": 8, "output_size": 8}
WORDS = "the a cat dog sat on mat . le la chat chien".split()


# ---- helpers ------------------------------------------------------------------------------------

def repo_params(**changes: Any) -> dict[str, Any]:
    """The project's params.yaml with ``{"section.key.sub": value}`` changes applied."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        node = params
        for part in path:
            node = node[part]
        node[last] = value
    return params


def write_params(root: Path, params: dict[str, Any]) -> Path:
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path, stdin: str | bytes = "the cat sat .\n"
            ) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.decoding.cli ARGS`` with the project's interpreter; ``stdin`` as
    text (UTF-8) or as raw bytes; stdout and stderr come back as text."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    raw = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    done = subprocess.run([sys.executable, "-m", "rnnsearch.decoding.cli", *args], cwd=cwd,
                          env=env, input=raw, capture_output=True, timeout=300)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8"),
                                       done.stderr.decode("utf-8", errors="replace"))


def assert_refused(result: subprocess.CompletedProcess, *names: str) -> str:
    """Exit status 2, no traceback, and a last stderr line naming every one of ``names``."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines, "no error message on stderr"
    for name in names:
        assert name in lines[-1], f"{name!r} not in the last line: {lines[-1]!r}"
    return lines[-1]


def tiny_vocab() -> Vocabulary:
    return Vocabulary(SPECIALS + tuple(WORDS), (0,) * (len(SPECIALS) + len(WORDS)))


def translate_workspace(root: Path) -> Path:
    """params.yaml, data/tokenized (vocabularies, test.src) and a tiny data/models/search-50."""
    tokenized = root / "data" / "tokenized"
    tokenized.mkdir(parents=True)
    for side in ("src", "tgt"):
        tiny_vocab().save(tokenized / f"vocab.{side}.txt")
    (tokenized / "test.src").write_text("the cat sat on the mat .\na dog sat .\n", encoding="utf-8")
    write_params(root, repo_params(**{"translate.speed_sentences": 0}))
    model = build_model(ModelConfig(model="search", **TINY_MODEL), len(tiny_vocab()),
                        len(tiny_vocab()))
    save_model(model, root / "data/models/search-50/model.pt")
    return root


def spoil_model(path: Path, how: str) -> None:
    """Make ``path`` (a good model.pt) unreadable in one of the ways the probe found."""
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "missing":
        path.unlink()
    elif how == "tensor":
        torch.save(torch.zeros(3), path)
    elif how == "not_a_model":
        torch.save({"weights": torch.zeros(3)}, path)
    elif how == "text":
        path.write_text("not a model\n")
    else:
        raise AssertionError(how)


def train_corpus(root: Path) -> Path:
    """A tokenised corpus of 40 train and 6 dev pairs over 12 words, with its vocabularies."""
    data = root / "tokenized"
    data.mkdir(parents=True)
    words = [f"w{i}" for i in range(12)]
    for split, n in (("train", 40), ("dev", 6)):
        src = [" ".join(words[(i + j) % 12] for j in range(2 + i % 5)) for i in range(n)]
        (data / f"{split}.src").write_text("".join(s + "\n" for s in src))
        (data / f"{split}.tgt").write_text("".join(s.upper() + "\n" for s in src))
    for side in ("src", "tgt"):
        Vocabulary.build(Counter((data / f"train.{side}").read_text().split()), 50).save(
            data / f"vocab.{side}.txt")
    return data


def train_params(**sections: dict[str, Any]) -> dict[str, Any]:
    """A tiny ``train`` section (the train stage reads no other)."""
    train = {"grid": {"models": ["encdec", "search"], "max_lens": [12]},
             "base_model": dict(TINY_MODEL),
             "models": {"encdec": {"model": "encdec", "bidirectional": False},
                        "search": {"model": "search"}},
             "data": {"batch_size": 8, "dev_bleu_sentences": 0},
             "budget": {"max_steps": 2, "val_every_steps": 2, "max_minutes": 5},
             "trainer": {"log_every_steps": 1, "threads": 1}}
    for name, values in sections.items():
        train[name] = {**train.get(name, {}), **values} if isinstance(values, dict) else values
    return {"train": train}


def train_args(root: Path, data: Path | None, *extra: str) -> list[str]:
    """The train stage's command line for one tiny RNNsearch cell under ``root``."""
    return ["--model", "search", "--max-len", "12", "--data", str(data or root / "tokenized"),
            "--out", "out", "--metrics", "metrics.json", *extra]


def run_train(root: Path, params: dict[str, Any], data: Path | None = None, *extra: str
              ) -> subprocess.CompletedProcess:
    write_params(root, params)
    return run_script("train.py", *train_args(root, data, *extra), cwd=root)


def run_train_here(root: Path, params: dict[str, Any], data: Path, monkeypatch, capsys
                   ) -> subprocess.CompletedProcess:
    """:func:`run_train` in this process, through the stage runner's own ``run`` (what
    ``pipeline/train.py`` calls), for checks that stop at load: no fresh interpreter each."""
    write_params(root, params)
    monkeypatch.chdir(root)
    code = run_stage(train_stage.STAGE, train_args(root, data))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(["train"], code, captured.out, captured.err)


def assert_no_train_output(root: Path) -> None:
    assert not (root / "out").exists() and not (root / "metrics.json").exists()


REFS = ["The cat sat on the mat.", "A dog barked.", "It rains."]


def evaluate_workspace(root: Path, hyps: list[str], **changes: Any) -> Path:
    """References, tokenised training targets and test set, vocabularies and two cells'
    hypotheses, the same lines as detokenised and as tokenised output."""
    (root / "data/prepared").mkdir(parents=True)
    for side in ("src", "tgt"):
        (root / f"data/prepared/test.{side}").write_text("".join(r + "\n" for r in REFS))
    tok = root / "data/tokenized"
    tok.mkdir(parents=True)
    for side in ("src", "tgt"):
        for split in ("train", "test"):
            (tok / f"{split}.{side}").write_text("".join(r.replace(".", " .") + "\n" for r in REFS))
        tiny_vocab().save(tok / f"vocab.{side}.txt")
    for cell in ("encdec-50", "search-50"):
        folder = root / "data/translations" / cell
        folder.mkdir(parents=True)
        for system in ("greedy", "beam"):
            for kind in ("detok", "tok"):
                (folder / f"{system}.{kind}.txt").write_text("".join(h + "\n" for h in hyps),
                                                             encoding="utf-8")
        (folder / "meta.json").write_text(json.dumps({
            "cell": cell, "model": {"model": cell.split("-")[0]}, "has_attention": False,
            "sentences": len(REFS), "systems": ["greedy", "beam"], "speed": {}}))
    write_params(root, repo_params(**{"evaluate.bootstrap_samples": 20,
                                      "train.grid.max_lens": [50], **changes}))
    return root


# ---- 7. params that crashed with a traceback: the key is named at load ------------------------

@pytest.mark.parametrize("section, value, key", [
    ("trainer", {"devices": 0}, "train.trainer.devices"),
    ("trainer", {"devices": -3}, "train.trainer.devices"),
    ("trainer", {"accelerator": "tpu"}, "train.trainer.accelerator"),
    ("trainer", {"precision": "bf17-mixed"}, "train.trainer.precision"),
    ("trainer", {"precision": "16-true"}, "train.trainer.precision"),   # Lightning's, but the
    ("trainer", {"precision": "bf16-true"}, "train.trainer.precision"),  # models train with
    ("trainer", {"precision": "64-true"}, "train.trainer.precision"),    # 32-bit weights
    ("trainer", {"strategy": "dpp"}, "train.trainer.strategy"),
    ("seed", -1, "train.seed"),
])
def test_train_stage_refuses_bad_trainer_and_seed(tmp_path, monkeypatch, capsys, section, value,
                                                  key):
    """In this process; ``test_train_stage_refuses_at_load_as_a_process`` runs the entry point."""
    data = train_corpus(tmp_path)
    result = run_train_here(tmp_path, train_params(**{section: value}), data, monkeypatch, capsys)
    assert_refused(result, key)
    assert_no_train_output(tmp_path)


def test_train_stage_refuses_at_load_as_a_process(tmp_path):
    data = train_corpus(tmp_path)
    result = run_train(tmp_path, train_params(trainer={"devices": 0}), data)
    assert_refused(result, "train.trainer.devices")
    assert_no_train_output(tmp_path)


@pytest.mark.parametrize("changes, key", [
    ({"evaluate.bleu_tokenize": "ja-mecab"}, "evaluate.bleu_tokenize"),
    ({"evaluate.bootstrap_seed": 0}, "evaluate.bootstrap_seed"),
    ({"evaluate.bootstrap_seed": -5}, "evaluate.bootstrap_seed"),
    ({"evaluate.baseline": "luong_dot"}, "evaluate.baseline"),   # 8: tests silently dropped
])
def test_evaluate_stage_refuses_bad_params(tmp_path, changes, key):
    if changes.get("evaluate.bleu_tokenize") == "ja-mecab":
        pytest.importorskip("sacrebleu")
        try:
            import MeCab  # noqa: F401
            pytest.skip("the ja extra is installed here: ja-mecab is a valid choice")
        except ImportError:
            pass
    root = evaluate_workspace(tmp_path, REFS, **changes)
    line = assert_refused(run_script("evaluate.py", cwd=root), key)
    if "bleu_tokenize" in key:
        assert "pip install" in line and "sacrebleu[ja]" in line
    assert not (root / "metrics/eval").exists() and not (root / "plots/bleu_by_length").exists()


@pytest.mark.parametrize("script, section, args, outputs", [
    ("prepare.py", "prepare", (), ("data/prepared", "metrics/prepare.json")),
    ("embed.py", "embed", (), ("data/embed", "metrics/embed.json")),
    ("pretrain_lm.py", "pretrain_lm", ("--no-mlflow",),
     ("data/lm/decoder_init.pt", "metrics/lm.json", "plots/gradient_flow.csv")),
])
def test_negative_seed_fails_at_load(tmp_path, script, section, args, outputs):
    write_params(tmp_path, repo_params(**{f"{section}.seed": -1}))
    assert_refused(run_script(script, *args, cwd=tmp_path), f"{section}.seed")
    assert not any((tmp_path / output).exists() for output in outputs)


def test_translate_stage_refuses_unreadable_models(tmp_path):
    """One stage run per way a model.pt can be unreadable (translate and the CLI share the loader)."""
    for how in ("truncated", "empty", "tensor"):
        root = translate_workspace(tmp_path / how)
        model = root / "data/models/search-50/model.pt"
        spoil_model(model, how)
        result = run_script("translate.py", "--cell", "search-50", cwd=root)
        assert_refused(result, "data/models/search-50/model.pt")
        assert not (root / "data/translations/search-50").exists()
        assert not (root / "metrics/alignments/search-50.json").exists()


@pytest.mark.parametrize("how", ["truncated", "directory", "missing", "not_a_model"])
def test_cli_refuses_unreadable_models(tmp_path, how):
    root = translate_workspace(tmp_path)
    model = root / "data/models/search-50/model.pt"
    spoil_model(model, how)
    result = run_cli("--model", str(model), "--vocab-dir", "data/tokenized", cwd=root)
    assert_refused(result, str(model))
    assert result.stdout == ""


def test_cli_refuses_batch_size_zero_and_a_missing_params_file(tmp_path):
    root = translate_workspace(tmp_path)
    model = str(root / "data/models/search-50/model.pt")
    line = assert_refused(run_cli("--model", model, "--batch-size", "0", cwd=root), "--batch-size")
    assert "must be >= 1" in line
    missing = str(tmp_path / "nope.yaml")                      # 8: was silently ignored
    assert_refused(run_cli("--model", model, "--params", missing, cwd=root), missing)


def test_cli_refuses_to_guess_the_languages(tmp_path):
    """Without a params file, or with one that lacks a section it reads, the command names
    what is missing instead of tokenising as English -> French."""
    root = translate_workspace(tmp_path)
    model = str(root / "data/models/search-50/model.pt")
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    (root / "params.yaml").unlink()
    line = assert_refused(run_cli("--model", model, "--vocab-dir", "data/tokenized", cwd=root),
                          "--params")
    assert "prepare.src_lang" in line
    del params["tokenize"]
    (root / "other.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    assert_refused(run_cli("--model", model, "--vocab-dir", "data/tokenized", "--params",
                           "other.yaml", cwd=root), "other.yaml: missing section 'tokenize'")


@pytest.mark.parametrize("module, args, refusal", [
    ("rnnsearch.decoding.device_agreement", ["--seconds", "-3"], "argument --seconds: must be >= 0, got -3.0"),
    ("rnnsearch.decoding.device_agreement", ["--max-sentences", "-1"],
     "argument --max-sentences: must be >= 0, got -1"),
    ("rnnsearch.decoding.device_agreement", ["--seconds", "nan"], "argument --seconds: must be >= 0, got nan"),
    ("rnnsearch.experiments.tiny", ["--sentences", "0"], "argument --sentences: must be >= 1, got 0"),
    ("rnnsearch.experiments.synthetic", ["--lr", "fast"],
     "argument --lr: expected a number, got 'fast'"),
    ("rnnsearch.bench", ["--threads", "0"], "argument --threads: must be >= 1, got 0"),
    ("rnnsearch.bench.side_by_side", ["--against", "HEAD", "--rounds", "0"],
     "argument --rounds: must be >= 1, got 0"),
], ids=["compare-seconds", "compare-max-sentences", "compare-nan", "tiny", "synthetic", "bench",
        "side-by-side"])
def test_tool_commands_refuse_negative_and_malformed_numbers(tmp_path, monkeypatch, capsys,
                                                            module, args, refusal):
    """Was: a negative --seconds or --max-sentences silently changed what was compared (a
    negative slice dropped the last sentences); a negative batch size or budget ran into a
    traceback later. argparse now refuses them at once, naming the option. (In this process:
    what ``python -m <module>`` runs, without a second start of torch and Lightning.)"""
    required = ["--model", "m.pt", "--vocab-dir", ".", "--sources", "s.txt"] \
        if module.endswith("compare") else []
    package = importlib.util.find_spec(module).submodule_search_locations   # -m runs __main__
    main = importlib.import_module(f"{module}.__main__" if package else module).main
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main([*required, *args])
    assert_refused(subprocess.CompletedProcess([module], refused.value.code, "",
                                               capsys.readouterr().err), refusal)
    assert list(tmp_path.iterdir()) == []


def test_cli_names_the_line_of_invalid_utf8_in_a_file_and_on_stdin(tmp_path):
    """Was: a file ended in a traceback-free but line-less codec message, and stdin's bad
    bytes were silently decoded as something else."""
    root = translate_workspace(tmp_path)
    model = str(root / "data/models/search-50/model.pt")
    text = tmp_path / "input.txt"
    text.write_bytes(b"the cat sat .\n\xff the dog\n")
    assert_refused(run_cli("--model", model, str(text), cwd=root), f"{text}:2:", "invalid UTF-8")
    piped = run_cli("--model", model, cwd=root, stdin=b"the cat\nthe dog\nthe \xe9 mat\n")
    assert_refused(piped, "<stdin>:3:", "invalid UTF-8")
    assert piped.stdout == ""


def test_truncated_decoder_init_names_the_file(tmp_path):
    data = train_corpus(tmp_path)
    lm = torch.nn.Module()
    vocab = len(Vocabulary.load(data / "vocab.tgt.txt"))
    lm.embedding, lm.rnn = torch.nn.Embedding(vocab, 8), torch.nn.GRU(8, 8, batch_first=True)
    path = tmp_path / "decoder_init.pt"
    torch.save({"meta": {"cell": "gru"}, "state_dict": lm.state_dict()}, path)
    path.write_bytes(path.read_bytes()[:300])
    lm_params = {"pretrain_lm": {"cell": "gru", "embedding_size": 8, "hidden_size": 8}}
    result = run_train(tmp_path, {**train_params(init={"lm": True}), **lm_params}, data, "--lm",
                       str(path))
    assert_refused(result, str(path))
    assert_no_train_output(tmp_path)
    with pytest.raises(DataError, match="decoder_init.pt: cannot be read"):
        read_decoder_init(path)


def test_nan_word_vectors_are_refused(tmp_path):
    data = train_corpus(tmp_path)
    embed = tmp_path / "embed"
    embed.mkdir()
    for side in ("src", "tgt"):
        size = len(Vocabulary.load(data / f"vocab.{side}.txt"))
        vectors = np.ones((size, 8), dtype=np.float32)
        vectors[5, 2] = np.nan if side == "src" else np.inf
        np.save(embed / f"{side}.vocab.npy", vectors)
        np.save(embed / f"{side}.mask.npy", np.ones(size, dtype=bool))
    result = run_train(tmp_path, train_params(init={"embeddings": True}), data,
                       "--embed-dir", str(embed))
    line = assert_refused(result, str(embed / "src.vocab.npy"))
    assert "NaN or infinite" in line and "row 5" in line
    assert_no_train_output(tmp_path)
    with pytest.raises(DataError, match=r"tgt\.vocab\.npy: 1 NaN or infinite"):
        read_vector_rows(embed / "tgt.vocab.npy", embed / "tgt.mask.npy", vectors.shape[0], 8)


EMPTY_METRICS = [(name, "{}", "holds no metrics (an empty JSON object); rerun the")
                 for name in ("eval/search-50.json", "alignments/search-50.json",
                              "train/search-50.json", "embed.json", "lm.json", "senses.json",
                              "align.json", "align_attention.json")]


@pytest.mark.parametrize("name, content, message", [
    ("eval/search-50.json", '{"systems": {}}', "missing key 'model'"),
    ("eval/search-50.json", '{"model": {"name": "search"}, "systems": {"beam": {"al',
     "not valid JSON"),
    *EMPTY_METRICS,
    ("lm.json", '{"environment": {"python": "3.11"}}',
     "holds no metrics (only its 'environment' block); rerun the pretrain_lm stage"),
])
def test_report_names_a_bad_metrics_file(tmp_path, name, content, message):
    """Beside one good evaluated cell, a bad metrics file. Was, for one holding ``{}``: the
    report left its table out (or showed it empty) without a word."""
    write_params(tmp_path, repo_params())
    good = json.dumps(_eval("search", 50, 7.0))
    for path, text in (("eval/search-50.json", good), (name, content)):
        (tmp_path / "metrics" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "metrics" / path).write_text(text)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/README.md").write_text("the previous report\n")
    line = assert_refused(run_script("report.py", "--no-mlflow", cwd=tmp_path),
                          f"metrics/{name}")
    assert message in line
    assert (tmp_path / "reports/README.md").read_text() == "the previous report\n"
    assert not (tmp_path / "reports/results").exists()


def test_embed_stage_names_file_and_key_of_incomplete_meta(tmp_path):
    write_params(tmp_path, repo_params())
    (tmp_path / "data/prepared").mkdir(parents=True)
    (tmp_path / "data/prepared/meta.json").write_text(json.dumps({"src_lang": "en"}))
    line = assert_refused(run_script("embed.py", cwd=tmp_path), "data/prepared/meta.json")
    assert "tgt_lang" in line
    assert not (tmp_path / "data/embed").exists()
    assert not (tmp_path / "metrics/embed.json").exists()


# ---- 8. silently wrong before ------------------------------------------------------------------

def test_vocabulary_with_a_repeated_word_is_refused(tmp_path):
    root = translate_workspace(tmp_path)
    vocab = root / "data/tokenized/vocab.tgt.txt"
    lines = vocab.read_text().splitlines()
    vocab.write_text("\n".join(lines[:8] + ["cat\t0"] + lines[8:]) + "\n")   # 'cat' is line 7
    line = assert_refused(run_script("translate.py", "--cell", "search-50", cwd=root),
                          "data/tokenized/vocab.tgt.txt")
    assert "line 7" in line and ":9:" in line and "'cat'" in line
    assert not (root / "data/translations/search-50").exists()


def test_duplicated_params_key_names_file_line_and_key(tmp_path):
    text = (REPO / "params.yaml").read_text(encoding="utf-8")
    text = text.replace("\nprepare:\n", "\nprepare:\n  seed: 7\n", 1)   # seed appears again below
    (tmp_path / "params.yaml").write_text(text, encoding="utf-8")
    number = text.splitlines().index("prepare:") + 2
    line = assert_refused(run_script("prepare.py", cwd=tmp_path), "params.yaml")
    assert "duplicate key 'seed'" in line and "first at line" in line
    later = [i for i, l in enumerate(text.splitlines(), 1) if l.startswith("  seed: 1234")][0]
    assert f"params.yaml:{later}:" in line and f"line {number}" in line
    assert not (tmp_path / "data/prepared").exists()


def corpus_mirror(root: Path) -> dict[str, str]:
    """A 'tiny' en-fr corpus in ``root``: a BOM before the first train line, a source line of
    control characters only, and a word with a NUL inside; returns the files' sha256."""
    rows = [("\ufeffHello world .", "Bonjour le monde ."), ("\x01\x02\x7f", "Rien ."),
            ("good\x00 morning .", "bon matin ."), ("A cat .", "Un chat .")]
    sums = {}
    (root / "tiny").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        for index, lang in enumerate(("en", "fr")):
            name = f"{split}.{lang}.gz"
            text = "".join(row[index] + "\n" for row in rows)
            data = gzip.compress(text.encode("utf-8"), mtime=0)
            (root / "tiny" / name).write_bytes(data)
            sums[name] = hashlib.sha256(data).hexdigest()
    return sums


PREPARE_TINY = """\
import sys
from rnnsearch.data import corpora
corpora.REGISTRY["tiny"] = corpora.Corpus(
    name="tiny", languages=("en", "fr"), split_files={s: s for s in corpora.SPLITS},
    sha256=%r, url_template=None)
from rnnsearch.stages.runner import main
main("prepare")
"""


def prepare_tiny(root: Path, sums: dict[str, str]) -> subprocess.CompletedProcess:
    """The prepare stage (its runner and body) in ``root`` on the mirror ``root/mirror`` of
    :func:`corpus_mirror`, registered as corpus 'tiny' with the files' sha256 ``sums``."""
    (root / "prepare_tiny.py").write_text(PREPARE_TINY % sums)
    write_params(root, repo_params(**{
        "prepare": {"corpus": "tiny", "src_lang": "en", "tgt_lang": "fr",
                    "mirror": str(root / "mirror"), "download": False,
                    "sizes": {"train": 0, "dev": 0, "test": 0}, "test_buckets": [],
                    "test_per_bucket": 0}}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    env.pop("RNNSEARCH_CORPORA", None)                  # the mirror of params.yaml, not another
    return subprocess.run([sys.executable, "prepare_tiny.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_prepare_strips_a_bom_and_drops_control_only_lines(tmp_path):
    """The prepare stage (its runner and body, with a test corpus registered) on a corpus whose
    first line starts with a BOM and whose second source line holds only control characters."""
    done = prepare_tiny(tmp_path, corpus_mirror(tmp_path / "mirror"))
    assert done.returncode == 0, done.stderr[-3000:]
    src = read_lines(tmp_path / "data/prepared/train.src")
    assert src == ["Hello world .", "good morning .", "A cat ."]
    assert (tmp_path / "data/prepared/train.src").read_bytes().startswith(b"Hello")
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["train"]["dropped"]["control"] == 1 and metrics["train"]["pairs"] == 3


def test_prepare_names_a_corrupt_gzip_file_of_the_mirror(tmp_path):
    """Was: a ``zlib.error`` traceback naming no file, for a mirror file whose deflate stream is
    damaged (not truncated) but whose sha256 is the registered one."""
    sums = corpus_mirror(tmp_path / "mirror")
    path = tmp_path / "mirror/tiny/dev.fr.gz"
    data = bytearray(path.read_bytes())
    data[10:18] = b"\xff" * 8
    path.write_bytes(bytes(data))
    sums["dev.fr.gz"] = hashlib.sha256(data).hexdigest()
    line = assert_refused(prepare_tiny(tmp_path, sums), f"{path}: corrupt gzip data")
    assert "invalid block type" in line
    assert not (tmp_path / "data").exists() and not (tmp_path / "metrics").exists()


def test_hypotheses_with_unicode_line_separators_keep_their_lines(tmp_path):
    """9: a hypothesis holding U+2028, \\x0b or \\x1c is still one line (the writer's \\n)."""
    hyps = ["The cat\u2028sat on the mat.", "A dog\x0bbarked.", "It\x1crains."]
    root = evaluate_workspace(tmp_path, hyps)
    done = run_script("evaluate.py", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((root / "metrics/eval/search-50.json").read_text())
    beam = metrics["systems"]["beam"]["all"]
    assert beam["n"] == len(REFS) and beam["bleu"] == corpus_scores(hyps, REFS)["bleu"]


# ---- library-level checks (no subprocess) -------------------------------------------------------

@pytest.mark.parametrize("cls, section, data", [
    (PrepareConfig, "prepare", {"corpus": "multi30k", "src_lang": "en", "tgt_lang": "fr"}),
    (EmbedConfig, "embed", {}),
    (PretrainLMConfig, "pretrain_lm", {}),
    (TrainConfig, "train", train_params()["train"]),
])
@pytest.mark.parametrize("seed", [-1, 2**32])
def test_every_seed_is_range_checked(cls, section, data, seed):
    with pytest.raises(ConfigError, match=rf"^{section}\.seed: a seed must be in"):
        from_dict(cls, {**data, "seed": seed}, section)


def test_trainer_values_checked_against_lightnings_registries():
    for bad, key in (({"devices": 0}, "devices"), ({"devices": "0,x"}, "devices"),
                     ({"precision": "bf17"}, "precision"), ({"strategy": "dpp"}, "strategy"),
                     ({"accelerator": "tpuu"}, "accelerator")):
        with pytest.raises(ConfigError, match=rf"^train\.trainer\.{key}:"):
            from_dict(TrainerConfig, bad, "train.trainer")
    for good in ({"devices": "auto"}, {"devices": -1}, {"precision": "bf16-mixed"},
                 {"strategy": "ddp", "devices": 2}, {"accelerator": "gpu"}):
        from_dict(TrainerConfig, good, "train.trainer")          # valid somewhere: no error
    tpu = from_dict(TrainerConfig, {"accelerator": "tpu"}, "train.trainer")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"^train\.trainer\.accelerator: Lightning cannot"):
            tpu.check_runtime("train.trainer")


def test_baseline_must_be_a_grid_model():
    cfg = EvaluateConfig(baseline="luong_dot")
    with pytest.raises(ConfigError, match=r"^evaluate\.baseline: 'luong_dot' is not a model"):
        check_baseline(cfg, GridConfig(models=("encdec", "search")))
    check_baseline(cfg, GridConfig(models=("search",)))          # one model: nothing to test
    check_baseline(EvaluateConfig(baseline="x", bootstrap_samples=0), GridConfig())


def test_read_params_refuses_a_duplicated_nested_key(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("train:\n  trainer:\n    devices: 1\n    devices: 2\n")
    with pytest.raises(ConfigError, match=r"p\.yaml:4: duplicate key 'devices' \(first at line 3\)"):
        read_params(path)


@pytest.mark.parametrize("how", ["truncated", "empty", "directory", "missing", "tensor",
                                 "not_a_model", "text"])
def test_load_model_names_the_file_for_every_unreadable_case(tmp_path, how):
    path = tmp_path / "model.pt"
    save_model(build_model(ModelConfig(**TINY_MODEL), 20, 20), path)
    spoil_model(path, how)
    with pytest.raises(DataError) as err:
        load_model(path)
    assert str(err.value).startswith(f"{path}: ")


def test_read_lines_strips_a_bom_and_splits_on_newline_only(tmp_path):
    path = tmp_path / "text"
    path.write_bytes("\ufeffone\u2028two\r\nthree\x1c\x0bfour\n\ufeffkeep\n".encode("utf-8"))
    assert read_lines(path) == ["one\u2028two", "three\x1c\x0bfour", "\ufeffkeep"]


def test_clean_counts_control_only_pairs():
    src, tgt, dropped = clean_pairs(["\x01\x02", "a\x00b  c", "\u0085", "ok"],
                                    ["x", "y", "z", "\x7f"], CleanRules())
    assert src == ["ab c"] and tgt == ["y"]
    assert dropped["control"] == 2 and dropped["empty"] == 1


def test_report_inputs_name_the_missing_key(tmp_path):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval/search-50.json").write_text(json.dumps(
        {"model": {"name": "search"}, "systems": {"beam": {"all": {}}}}))
    with pytest.raises(DataError, match=r"search-50\.json: missing key 'systems\.beam\.by_length'"):
        ReportInputs.load(tmp_path)


# ---- a damaged resume state of an interrupted training ------------------------------------------

@pytest.fixture(scope="module")
def trained_cell(tmp_path_factory, _empty_mlflow_store) -> Path:
    """A tiny RNNsearch cell the train stage trained to the end (``tokenized``, ``params.yaml``,
    ``out``, ``metrics.json``), logged to a store of its own; tests damage a copy of it."""
    root = tmp_path_factory.mktemp("trained")
    store = root / "mlflow.db"
    shutil.copyfile(_empty_mlflow_store, store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
        assert run_train(root, train_params(), train_corpus(root)).returncode == 0
    return root


def copy_of_trained_cell(trained: Path, root: Path) -> Path:
    """The trained cell's outputs and params copied to ``root``; returns its corpus (read
    where it was trained, as a rerun of the same command would)."""
    shutil.copytree(trained / "out", root / "out")
    for name in ("params.yaml", "metrics.json"):
        shutil.copyfile(trained / name, root / name)
    return trained / "tokenized"


def test_a_damaged_run_record_is_named_and_the_cell_trains_afresh(tmp_path, trained_cell):
    """A truncated ``run.json`` in the cell's resume folder (a damaged ``last.ckpt``:
    tests/test_resume_exact.py): one warning naming the file, exit 0, a model trained afresh,
    and no resume state left behind."""
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig
    from rnnsearch.training.run import run_fingerprint
    from rnnsearch.training.session import Session

    data = copy_of_trained_cell(trained_cell, tmp_path)
    config = from_dict(TrainConfig, train_params()["train"], "train")
    session = Session(tmp_path / ".cache/resume/train/out",
                      run_fingerprint(config, "search", 12, data))
    session.folder.mkdir(parents=True)
    (session.folder / "run.json").write_text('{"fingerprint": "')         # cut off
    result = run_train(tmp_path, train_params(), data)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    warnings = [line for line in result.stderr.splitlines() if "training afresh" in line]
    assert len(warnings) == 1 and str(session.folder / "run.json") in warnings[0]
    assert json.loads((tmp_path / "metrics.json").read_text())["resumed"] is False
    assert not session.folder.exists()


def test_a_run_that_diverges_to_nan_fails_and_keeps_the_previous_model(tmp_path, trained_cell):
    """A NaN learning rate scale (lr huge) drives the dev loss to NaN: exit 2 naming the output
    folder and the key, and the earlier model.pt is left as it was."""
    data = copy_of_trained_cell(trained_cell, tmp_path)
    before = (tmp_path / "out/model.pt").read_bytes()
    result = run_train(tmp_path, train_params(optim={"lr": 1e30, "clip_norm": 0.0}), data)
    message = assert_refused(result, "out", "diverged")
    assert "val_loss" in message
    assert (tmp_path / "out/model.pt").read_bytes() == before
