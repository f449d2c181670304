"""Training: bucketing, batches, padding-free loss, the train stage end to end, resume, DDP, bad input."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import yaml

from rnnsearch.config.base import from_dict, load_section
from rnnsearch.errors import ConfigError, DataError
from rnnsearch.config.train import TrainConfig
from rnnsearch.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.seq2seq import build_model, load_model
from rnnsearch.training.data import TranslationDataModule, bucket_batches, collate, read_pairs
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.run import train_cell
from rnnsearch.training.session import Session

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = {"embedding_size": 8, "hidden_size": 8, "attention_size": 8, "output_size": 8}


def tiny_params(**sections) -> dict:
    params = {
        "grid": {"models": ["encdec", "search"], "max_lens": [12]},
        "base_model": TINY_MODEL,
        "models": {"encdec": {"model": "encdec", "bidirectional": False},
                   "search": {"model": "search"}},
        "data": {"batch_size": 8, "dev_bleu_sentences": 5},
        "budget": {"max_steps": 6, "val_every_steps": 3, "max_minutes": 5},
        "trainer": {"log_every_steps": 2, "threads": 1},
    }
    for name, values in sections.items():
        params[name] = {**params.get(name, {}), **values}
    return params


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A reversal task as tokenised text: 80 train and 12 dev pairs, 2-14 words."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(20)]
    data = tmp_path / "tokenized"
    data.mkdir()
    for split, n in (("train", 80), ("dev", 12)):
        src = [[rng.choice(words) for _ in range(rng.randint(2, 14))] for _ in range(n)]
        (data / f"{split}.src").write_text("".join(" ".join(s) + "\n" for s in src))
        (data / f"{split}.tgt").write_text("".join(" ".join(reversed(s)).upper() + "\n" for s in src))
    for side in ("src", "tgt"):
        counts = Counter((data / f"train.{side}").read_text().split())
        Vocabulary.build(counts, 100).save(data / f"vocab.{side}.txt")
    return data


def config(**sections) -> TrainConfig:
    return from_dict(TrainConfig, tiny_params(**sections), "train")


# ---- data -------------------------------------------------------------------------------------

def test_bucketing_covers_everything_once_with_little_padding():
    rng = random.Random(3)
    sources = [rng.randint(1, 50) for _ in range(2000)]
    lengths = [(s, max(1, s + rng.randint(-4, 4))) for s in sources]   # correlated, as in text
    batches = bucket_batches(lengths, 64, 0.1, random.Random(1))
    assert sorted(i for b in batches for i in b) == list(range(2000))
    assert max(len(b) for b in batches) == 64
    for b in batches:
        longest = (max(lengths[i][0] for i in b), max(lengths[i][1] for i in b))
        real = sum(sum(lengths[i]) for i in b)
        assert 1 - real / (len(b) * sum(longest)) <= 0.1
    assert batches == bucket_batches(lengths, 64, 0.1, random.Random(1))     # seeded
    assert batches != bucket_batches(lengths, 64, 0.1, random.Random(2))     # shuffled order


def test_collate_adds_bos_and_eos_and_pads():
    batch = collate([([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])])
    assert batch.src.tolist() == [[5, 6, 7], [5, PAD_ID, PAD_ID]]
    assert batch.src_len.tolist() == [3, 1]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID, PAD_ID], [BOS_ID, 8, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, EOS_ID]]
    assert batch.target_tokens == 8


def test_read_pairs_drops_pairs_over_max_len(corpus):
    src_vocab = Vocabulary.load(corpus / "vocab.src.txt")
    tgt_vocab = Vocabulary.load(corpus / "vocab.tgt.txt")
    everything, refs = read_pairs(corpus, "train", src_vocab, tgt_vocab)
    short, _ = read_pairs(corpus, "train", src_vocab, tgt_vocab, max_len=6)
    assert len(everything) == len(refs) == 80
    assert 0 < len(short) < 80 and all(len(s) <= 6 and len(t) <= 6 for s, t in short)


@pytest.mark.parametrize("model", ["encdec", "search", "luong", "transformer"])
def test_padding_does_not_change_any_sentence_loss(model):
    torch.manual_seed(0)
    extra = {"luong": {"bidirectional": False, "score": "dot"},
             "transformer": {"heads": 2, "feedforward_size": 16, "decoder_layers": 2}}.get(model, {})
    net = build_model(ModelConfig(model=model, **TINY_MODEL, **extra), 30, 30).eval()
    task = TranslationTask(net, config().optim)
    pairs = [([4, 5, 6, 7, 8, 9], [10, 11, 12]), ([4, 5], [10, 11, 12, 13, 14, 15, 16]), ([7], [20])]
    total, tokens = task.token_losses(collate(pairs))
    alone = [task.token_losses(collate([p])) for p in pairs]
    assert tokens == sum(n for _, n in alone)
    assert torch.allclose(total, sum(t for t, _ in alone), atol=1e-4)


def source_rows(batch) -> list[tuple[int, ...]]:
    """A batch's source sentences without padding, sorted: the batch as a set of pairs."""
    return sorted(tuple(i for i in row if i != PAD_ID) for row in batch.src.tolist())


class _BatchRecorder(pl.LightningModule):
    """Trains nothing; records each epoch's batches (as sorted source rows) as Lightning feeds them."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.epochs: list[list[list[tuple[int, ...]]]] = []

    def on_train_epoch_start(self) -> None:
        self.epochs.append([])

    def training_step(self, batch, batch_idx):
        self.epochs[-1].append(source_rows(batch))
        return self.weight.sum() * 0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_every_epoch_gets_its_own_batch_order_through_lightning(corpus):
    data = TranslationDataModule(corpus, max_len=0, batch_size=8, max_padding=0.3, seed=5)
    recorder = _BatchRecorder()
    pl.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
               enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
               use_distributed_sampler=False).fit(recorder, datamodule=data)
    first, second, third = recorder.epochs
    assert first != second and second != third and first != third      # reshuffled per epoch
    for epoch in (second, third):                                      # every pair once per epoch
        assert sorted(row for batch in epoch for row in batch) == sorted(
            row for batch in first for row in batch)
    sampler = data.train_dataloader().batch_sampler.sampler
    sampler.set_epoch(1)                                                # seeded: seed + epoch
    assert [source_rows(collate([data.train_pairs[i] for i in b])) for b in sampler] == second


# ---- config -----------------------------------------------------------------------------------

def test_grid_naming_a_missing_variant_fails_naming_the_key():
    with pytest.raises(ConfigError, match=r"train\.grid\.models\[1\].*'luong_x'"):
        config(grid={"models": ["encdec", "luong_x"]})


def test_unknown_model_or_cell_in_a_variant_fails_naming_the_key():
    with pytest.raises(ConfigError, match=r"train\.models\.search\.model"):
        from_dict(TrainConfig, {**tiny_params(), "models": {"search": {"model": "serch"}},
                                "grid": {"models": ["search"]}}, "train")
    with pytest.raises(ConfigError, match=r"train\.models\.encdec\.cell"):
        config(models={"encdec": {"model": "encdec", "cell": "lsmt"}})
    with pytest.raises(ConfigError, match=r"train\.base_model\.cell"):
        config(base_model={"cell": "lsmt"})
    with pytest.raises(ConfigError, match=r"train\.optim\.optimizer"):
        config(optim={"optimizer": "sgd"})


def test_project_params_yaml_train_section_is_valid():
    cfg = load_section(TrainConfig, "train", REPO / "params.yaml")
    assert all(cfg.model_config(name).model for name in cfg.models)


# ---- the stage --------------------------------------------------------------------------------

def test_train_cell_writes_model_checkpoint_and_metrics(corpus, tmp_path):
    out = tmp_path / "models" / "search-12"
    metrics = train_cell(config(), "search", 12, corpus, out)
    assert {p.name for p in out.iterdir()} == {"model.pt", ".resume"}
    assert not any((out / ".resume").iterdir())     # a finished run keeps no resume state
    assert metrics["steps"] == 6 and metrics["cell"] == "search-12"
    assert metrics["val_loss"] > 0 and "val_bleu" in metrics and metrics["tokens_per_s"] > 0
    model = load_model(out / "model.pt")
    assert model.config.model == "search" and model.has_attention


def test_accelerator_auto_trains_on_the_cpu_to_the_same_weights(corpus, tmp_path):
    """``accelerator: auto`` (params.yaml's default) picks the CPU where torch sees no GPU: the
    same weights, bit for bit, as ``accelerator: cpu``."""
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: auto picks it")
    weights = {}
    for accelerator in ("cpu", "auto"):
        out = tmp_path / accelerator / "search-12"
        train_cell(config(trainer={"accelerator": accelerator}), "search", 12, corpus, out)
        weights[accelerator] = load_model(out / "model.pt").state_dict()
    assert weights["cpu"].keys() == weights["auto"].keys()
    assert all(torch.equal(weights["cpu"][k], weights["auto"][k]) for k in weights["cpu"])


def test_tiny_model_overfits_a_tiny_corpus(corpus, tmp_path):
    cfg = config(optim={"lr": 0.02}, budget={"max_steps": 150, "val_every_steps": 150, "max_epochs": 500},
                 data={"dev_bleu_sentences": 0, "batch_size": 80},
                 base_model={k: 32 for k in TINY_MODEL})
    metrics = train_cell(cfg, "search", 5, corpus, tmp_path / "m")    # about 25 short pairs
    # dev pairs differ from train pairs, so check the training loss through the saved model
    model = load_model(tmp_path / "m" / "model.pt")
    src_vocab = Vocabulary.load(corpus / "vocab.src.txt")
    tgt_vocab = Vocabulary.load(corpus / "vocab.tgt.txt")
    pairs, _ = read_pairs(corpus, "train", src_vocab, tgt_vocab, 5)
    with torch.no_grad():
        total, tokens = TranslationTask(model, cfg.optim).token_losses(collate(pairs))
    assert metrics["steps"] == 150 and float(total) / tokens < 0.1


def dying_at_step(step: int):
    """(the training step, one that raises "killed" at global step ``step`` instead)."""
    original = TranslationTask.training_step

    def dies(self, batch, batch_idx):
        if self.global_step == step:
            raise RuntimeError("killed")
        return original(self, batch, batch_idx)

    return original, dies


def test_killed_run_resumes_from_last_checkpoint_to_the_same_step_count(corpus, tmp_path,
                                                                         monkeypatch):
    cfg = config(budget={"max_steps": 10, "val_every_steps": 3})
    out = tmp_path / "search-12"
    original, dies_at_step_7 = dying_at_step(7)
    monkeypatch.setattr(TranslationTask, "training_step", dies_at_step_7)
    with pytest.raises(RuntimeError, match="killed"):
        train_cell(cfg, "search", 12, corpus, out)
    [folder] = (out / ".resume").iterdir()
    assert (folder / "last.ckpt").is_file() and not (out / "model.pt").exists()
    monkeypatch.setattr(TranslationTask, "training_step", original)
    metrics = train_cell(cfg, "search", 12, corpus, out)
    assert metrics["resumed"] is True and metrics["steps"] == 10
    # a finished run is not resumed: rerunning (e.g. after a code change) starts afresh
    assert train_cell(cfg, "search", 12, corpus, out)["resumed"] is False


def test_changed_params_start_afresh_and_leave_the_other_runs_state(corpus, tmp_path):
    out = tmp_path / "search-12"
    other = Session(out / ".resume", "other-settings" + "0" * 50)
    other.start(resumed=False)
    other.last.write_text("another run's checkpoint")
    metrics = train_cell(config(budget={"max_steps": 2, "val_every_steps": 2}), "search", 12,
                         corpus, out)
    assert metrics["resumed"] is False and metrics["steps"] == 2
    assert other.last.read_text() == "another run's checkpoint"


def test_embedding_file_that_does_not_fit_fails_before_training(corpus, tmp_path):
    embed = tmp_path / "embed"
    embed.mkdir()
    vocab = len(Vocabulary.load(corpus / "vocab.src.txt"))
    for side in ("src", "tgt"):
        np.save(embed / f"{side}.vocab.npy", np.zeros((vocab, 5), dtype=np.float32))  # d 5, not 8
        np.save(embed / f"{side}.mask.npy", np.ones(vocab, dtype=bool))
    with pytest.raises(DataError, match=r"\(\d+, 5\).*\(\d+, 8\)"):
        train_cell(config(init={"embeddings": True}), "search", 12, corpus, tmp_path / "m", embed)
    assert not (tmp_path / "m" / ".resume").exists()     # no resume folder was opened


def test_lm_file_that_does_not_fit_fails_before_training(corpus, tmp_path):
    transfer = pytest.importorskip("rnnsearch.models.lm_transfer")
    vocab = len(Vocabulary.load(corpus / "vocab.tgt.txt"))
    lm = torch.nn.Module()
    lm.embedding, lm.rnn, lm.output = (torch.nn.Embedding(vocab, 8), torch.nn.LSTM(8, 8, batch_first=True),
                                       torch.nn.Linear(8, vocab))
    path = tmp_path / "decoder_init.pt"
    torch.save({"meta": {"cell": "lstm", "vocab_size": vocab, "embedding_size": 8, "hidden_size": 8,
                         "num_layers": 1}, "state_dict": lm.state_dict()}, path)
    assert callable(transfer.load_lm_into_decoder)
    with pytest.raises(DataError, match="LSTM.*GRU"):
        train_cell(config(init={"lm": True}), "search", 12, corpus, tmp_path / "m", lm_path=path)
    # the same LM into a decoder of its cell type loads and reports the fraction it initialised
    metrics = train_cell(config(init={"lm": True}, base_model={"cell": "lstm"},
                                budget={"max_steps": 1, "val_every_steps": 1}),
                         "search", 12, corpus, tmp_path / "m2", lm_path=path)
    assert 0 < metrics["lm_fraction"] < 1


def run_stage(params: dict, tmp_path: Path, corpus: Path, model: str = "search"):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": params}))
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    return subprocess.run([sys.executable, str(REPO / "pipeline" / "train.py"), "--params", str(path),
                           "--model", model, "--max-len", "12", "--data", str(corpus),
                           "--out", str(tmp_path / "out"), "--metrics", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def test_stage_script_reports_a_bad_grid_before_training(corpus, tmp_path):
    result = run_stage(tiny_params(grid={"models": ["search", "nope"]}), tmp_path, corpus)
    assert result.returncode == 2
    assert "train.grid.models[1]" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_ddp_two_cpu_processes(corpus, tmp_path):
    params = tiny_params(trainer={"strategy": "ddp", "devices": 2, "accelerator": "cpu",
                                  "threads": 1, "log_every_steps": 2},
                         budget={"max_steps": 4, "val_every_steps": 2, "max_minutes": 5})
    result = run_stage(params, tmp_path, corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["steps"] == 4 and (tmp_path / "out" / "model.pt").is_file()


def test_optimizer_choice_follows_params():
    net = build_model(ModelConfig(**TINY_MODEL), 20, 20)
    adam = TranslationTask(net, config().optim).configure_optimizers()
    adadelta = TranslationTask(net, config(optim={"optimizer": "adadelta", "lr": 1.0}).optim
                               ).configure_optimizers()
    assert isinstance(adam, torch.optim.Adam)
    assert isinstance(adadelta, torch.optim.Adadelta)
    assert adadelta.defaults["rho"] == 0.95 and adadelta.defaults["eps"] == 1e-6


def test_position_lr_scale_gives_local_p_predictor_its_own_rate():
    local_p = build_model(ModelConfig(**TINY_MODEL, model="luong", score="general",
                                      attention="local_p"), 20, 20)
    search = build_model(ModelConfig(**TINY_MODEL), 20, 20)
    scaled = config(optim={"lr": 0.002, "position_lr_scale": 0.1}).optim
    groups = TranslationTask(local_p, scaled).configure_optimizers().param_groups
    predictor = {id(p) for p in local_p.decoder.attention.position.parameters()}
    assert [len(g["params"]) for g in groups] == [len(list(local_p.parameters())) - 2, 2]
    assert {id(p) for p in groups[1]["params"]} == predictor
    assert groups[0]["lr"] == 0.002 and groups[1]["lr"] == pytest.approx(0.0002)
    # no predictor, or the scale at 1: one group over every parameter, as before the option
    for net, optim in ((search, scaled), (local_p, config().optim)):
        (group,) = TranslationTask(net, optim).configure_optimizers().param_groups
        assert [id(p) for p in group["params"]] == [id(p) for p in net.parameters()]


def test_position_lr_scale_must_be_positive():
    with pytest.raises(ConfigError, match=r"train\.optim\.position_lr_scale"):
        config(optim={"position_lr_scale": 0.0})


# ---- local-p's window centre while it trains (rnnsearch.experiments.local_p_trace) -----------

def local_p_params(tmp_path: Path) -> Path:
    params = tiny_params(models={"local_p": {"model": "luong", "score": "general",
                                             "attention": "local_p", "window": 2}})
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": params}))
    return path


def test_local_p_trace_follows_the_train_cell(corpus, tmp_path, capsys):
    from rnnsearch.experiments import local_p_trace

    out = tmp_path / "trace.json"
    args = ["--params", str(local_p_params(tmp_path)), "--model", "local_p", "--max-len", "12",
            "--data", str(corpus), "--steps", "6", "--every", "3", "--json", str(out)]
    assert local_p_trace.main(args) == 0
    rows = json.loads(out.read_text())
    assert [row["step"] for row in rows] == [0, 3, 6]
    assert all(0 < row[k] < 1 for row in rows for k in ("first", "middle", "last"))
    # untrained, the predictor's input is near 0: every window starts near the middle
    assert abs(rows[0]["input_mean"]) < 0.5 and rows[0]["first"] == pytest.approx(0.5, abs=0.12)
    assert rows[0]["input_mean"] != rows[-1]["input_mean"]       # the predictor trains
    assert capsys.readouterr().out.count("\n| 6 |") == 1         # one table row per trace point
    # the same steps from the same seed: the same numbers
    assert local_p_trace.main(args) == 0 and json.loads(out.read_text()) == rows


def test_local_p_trace_refuses_a_model_without_a_window_predictor(corpus, tmp_path, capsys):
    from rnnsearch.experiments import local_p_trace

    args = ["--params", str(local_p_params(tmp_path)), "--model", "search", "--max-len", "12",
            "--data", str(corpus), "--steps", "2"]
    assert local_p_trace.main(args) == 2
    assert "train.models.search: not a local-p model" in capsys.readouterr().err


def test_the_best_model_saver_keeps_the_strictly_best_and_any_number_beats_a_nan(tmp_path):
    """One saver for the translation models and the language model: a tie is not an
    improvement, a NaN never is, and a NaN kept as the first score is beaten by any number."""
    from types import SimpleNamespace

    from rnnsearch.training.callbacks import BestModelSaver

    saved: list[int] = []
    saver = BestModelSaver(tmp_path / "best.pt", "val/ppl", "min",
                           save=lambda model, path: saved.append(model))
    nan = float("nan")
    for step, value in enumerate([nan, 5.0, 5.0, 4.0, nan, 6.0], start=1):
        trainer = SimpleNamespace(sanity_checking=False, global_step=step, is_global_zero=True,
                                  callback_metrics={"val/ppl": torch.tensor(value)})
        saver.on_validation_end(trainer, SimpleNamespace(model=step))
    assert saved == [1, 2, 4]
    assert (saver.best, saver.best_step) == (4.0, 4)
