"""Supervised attention: the loss, the links the align stage writes for the training pairs,
their way into training batches, the params' errors, and tiny training runs with and without."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from rnnsearch.config.align import AlignConfig
from rnnsearch.config.base import check_params, from_dict
from rnnsearch.config.train import TrainConfig
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.errors import ConfigError, DataError
from rnnsearch.models.seq2seq import load_model
from rnnsearch.stages.align import pharaoh_lines
from rnnsearch.training.data import collate_linked, pad_to_shape, read_pairs
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.run import train_cell
from rnnsearch.training.supervision import (link_distribution, read_links, supervision_loss,
                                            supervision_weight)
from test_align import CORPUS, tiny_tokenized
from test_training import config, corpus, dying_at_step  # noqa: F401  (corpus: a fixture)


# ---- the loss ---------------------------------------------------------------------------------

def test_supervision_loss_equals_a_hand_computation():
    """Target word 0 is linked to source words 0 and 1 (1/2 each), word 1 to source word 1,
    word 2 (``</s>``) to none: -(1/2 ln 0.8 + 1/2 ln 0.2) - ln 0.6 over 2 linked words."""
    target = link_distribution([((0, 0), (1, 0), (1, 1))], src_len=2, tgt_len=3)
    assert target.tolist() == [[[0.5, 0.5], [0.0, 1.0], [0.0, 0.0]]]
    attention = torch.tensor([[[0.8, 0.2], [0.4, 0.6], [0.5, 0.5]]])
    total, linked = supervision_loss(attention, target)
    assert int(linked) == 2
    assert float(total) == pytest.approx(-(0.5 * math.log(0.8) + 0.5 * math.log(0.2))
                                         - math.log(0.6), rel=1e-6)


def test_zero_attention_on_a_link_counts_as_the_floor_not_infinity():
    """Local attention gives exact zeros outside its window."""
    total, _ = supervision_loss(torch.tensor([[[1.0, 0.0]]]), link_distribution([((1, 0),)], 2, 1))
    assert float(total) == pytest.approx(-math.log(1e-6))


def test_the_weight_decays_per_epoch():
    assert [supervision_weight(2.0, 0.5, epoch) for epoch in range(3)] == [2.0, 1.0, 0.5]


def test_with_decay_steps_the_weight_decays_every_that_many_steps_whatever_the_epoch():
    weights = [supervision_weight(2.0, 0.5, epoch=3, step=step, decay_steps=4)
               for step in (0, 3, 4, 7, 8, 12)]
    assert weights == [2.0, 2.0, 1.0, 1.0, 0.5, 0.25]


def test_batches_carry_each_pairs_links_padded_with_the_batch():
    items = [([5, 6, 7], [8, 9], ((0, 1), (2, 0))), ([5], [8, 9, 10], ((0, 2),))]
    batch = collate_linked(items)                 # src 2 x 3, targets 2 x 4 (</s> included)
    assert batch.links.shape == (2, 4, 3)
    assert batch.links[0, 1, 0] == 1 and batch.links[0, 0, 2] == 1 and batch.links[1, 2, 0] == 1
    assert float(batch.links.sum()) == 3
    padded = pad_to_shape(batch, rows=4, multiple=8)
    assert padded.links.shape == (4, 8, 8) and torch.equal(padded.links[:2, :4, :3], batch.links)


# ---- the links file ---------------------------------------------------------------------------

def test_pharaoh_lines_put_the_source_first_whichever_side_is_english():
    links = [{(0, 0), (1, 2)}, set()]              # (English, French) positions
    assert pharaoh_lines(links, e_is_src=True) == ["0-0 1-2", ""]
    assert pharaoh_lines(links, e_is_src=False) == ["0-0 2-1", ""]


# the six pairs and three with French adjectives after the noun
PAIRS = CORPUS + [("red", "rouge"), ("a red house", "une maison rouge"),
                  ("the red book", "le livre rouge")]


def run_align(root: Path, train_links: str | None) -> tuple[dict[str, str], dict]:
    """The align stage on :data:`PAIRS` (French words as the German source; the last two,
    last first, as dev pairs too); its ``train.links`` and ``dev.links`` and its ``meta.json``."""
    from conftest import REPO, run_script

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["align"].update(models=["ibm1"], iterations=20, train_links=train_links)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    tiny_tokenized(root, "de", "en")
    for side, words in (("src", [f for _, f in PAIRS]), ("tgt", [e for e, _ in PAIRS])):
        (root / f"tok/train.{side}").write_text("\n".join(words) + "\n", encoding="utf-8")
        (root / f"tok/dev.{side}").write_text("\n".join(words[-1:-3:-1]) + "\n",
                                              encoding="utf-8")
    result = run_script("align.py", "--params", str(root / "params.yaml"), "--data",
                        str(root / "tok"), "--meta", str(root / "meta.json"), "--out",
                        str(root / "align"), "--links-out", str(root / "links"), "--metrics",
                        str(root / "align.json"), "--processes", "1",
                        env={"MLFLOW_TRACKING_URI": f"sqlite:///{root}/mlflow.db"})
    assert result.returncode == 0, result.stderr[-2000:]
    return ({split: (root / f"links/{split}.links").read_text(encoding="utf-8")
             for split in ("train", "dev")}, json.loads((root / "links/meta.json").read_text()))


def test_align_stage_writes_source_target_links_for_every_training_line(tmp_path):
    text, meta = run_align(tmp_path, "ibm1/intersection")
    assert meta == {"train_links": "ibm1/intersection", "pairs": {"train": len(PAIRS), "dev": 2}}
    lines = text["train"].split("\n")[:-1]
    assert len(lines) == len(PAIRS)
    # la maison / the house; le livre rouge / the red book (source French, target English)
    assert lines[0] == "0-0 1-1" and lines[-1] == "0-0 1-2 2-1"
    assert text["dev"] == "0-0 1-2 2-1\n0-0 1-2 2-1\n"   # le livre rouge, une maison rouge


def test_without_train_links_the_links_output_is_the_same_empty_record(tmp_path):
    text, meta = run_align(tmp_path, None)
    assert text == {"train": "", "dev": ""}
    assert meta == {"train_links": None, "pairs": {"train": 0, "dev": 0}}
    with pytest.raises(DataError, match="links/meta.json: the align stage wrote no training links"):
        read_links(tmp_path / "links", "train", 6)


def write_links(folder: Path, lines: dict[str, list[str]]) -> Path:
    """``<split>.links`` of each split's ``lines`` and their ``meta.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in lines.items():
        (folder / f"{split}.links").write_text("".join(f"{line}\n" for line in rows))
    (folder / "meta.json").write_text(json.dumps({"train_links": "ibm1/union", "pairs": {
        split: len(rows) for split, rows in lines.items()}}))
    return folder


@pytest.mark.parametrize("lines, count, message", [
    (["0-0"], 2, "train.links has 1 lines but train.src has 2"),
    (["0-0", "1:1"], 2, r"train.links:2: '1:1' is not a link 'i-j'"),
])
def test_a_damaged_links_file_is_refused_naming_it(tmp_path, lines, count, message):
    with pytest.raises(DataError, match=message):
        read_links(write_links(tmp_path / "links", {"train": lines}), "train", count)


# ---- params -----------------------------------------------------------------------------------

SUPERVISED = {"weight": 1.0}
WITH_LINKS = {"align": {"train_links": "fast_align_vb/grow-diag-final-and"}}


@pytest.mark.parametrize("sections, message", [
    ({"supervised_attention": {"weight": -1.0}},
     r"train.supervised_attention.weight: must be a finite number >= 0 \(0: off\), got -1.0"),
    ({"supervised_attention": {"weight": 1.0, "decay": 0}},
     r"train.supervised_attention.decay: must be in \(0, 1\]"),
    ({"supervised_attention": {"weight": 1.0, "decay": 1.5}},
     r"train.supervised_attention.decay: must be in \(0, 1\]"),
    ({"supervised_attention": {"weight": 1.0, "decay_steps": -5}},
     r"train.supervised_attention.decay_steps: must be >= 0 \(0: the weight decays once per "
     r"epoch\), got -5"),
    ({"supervised_attention": SUPERVISED, "grid": {"models": ["encdec"]}},
     r"train.supervised_attention.weight: is 1.0, but no model of train.grid.models \(encdec\) "
     r"has attention to supervise"),
])
def test_bad_supervised_attention_params_are_refused_naming_the_key(sections, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        config(**sections)


@pytest.mark.parametrize("params, message", [
    ({}, "train.supervised_attention.weight: is > 0, but align.train_links is null"),
    ({**WITH_LINKS, "tokenize": {"units": "bpe"}},
     "train.supervised_attention.weight: is > 0, but tokenize.units is 'bpe'"),
])
def test_supervision_without_word_links_is_refused_naming_both_keys(params, message):
    cfg = config(supervised_attention=SUPERVISED)
    with pytest.raises(ConfigError, match=f"^{message}"):
        check_params(cfg, "train", params)
    check_params(cfg, "train", WITH_LINKS)


@pytest.mark.parametrize("values, params, message", [
    ({"train_links": "ibm2/union"}, {}, "align.train_links: must be '<model>/<symmetrisation>'"),
    ({"train_links": "ibm1/gdfa"}, {}, "align.train_links: must be '<model>/<symmetrisation>'"),
    ({"train_links": "ibm1/union", "max_pairs": 100}, {},
     r"align.train_links: links every training pair, but align.max_pairs \(100\)"),
    ({"train_links": "ibm1/union"}, {"tokenize": {"units": "unigram"}},
     "align.train_links: links Moses words, but tokenize.units is 'unigram'"),
])
def test_bad_train_links_are_refused_naming_the_key(values, params, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        check_params(from_dict(AlignConfig, values, "align"), "align", params)


def test_a_grid_with_encdec_supervises_only_its_attention_models():
    cfg = config(supervised_attention=SUPERVISED)
    assert [cfg.supervised(m) for m in cfg.grid.models] == [False, True]
    assert not config().supervised("search")


# ---- training ---------------------------------------------------------------------------------

def reversal_links(data: Path) -> Path:
    """The reversal corpus' true links: target word j translates source word n - 1 - j."""
    def rows(split: str) -> list[str]:
        lines = (data / f"{split}.src").read_text().split("\n")[:-1]
        return [" ".join(f"{len(s.split()) - 1 - j}-{j}" for j in range(len(s.split())))
                for s in lines]

    return write_links(data.parent / "links", {split: rows(split) for split in ("train", "dev")})


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_model(path).state_dict()


def same_weights(a: Path, b: Path) -> bool:
    first, second = weights(a), weights(b)
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_weight_zero_and_models_without_attention_never_read_the_links(corpus, tmp_path):
    """A folder that does not exist is never opened: the runs train exactly as without it."""
    missing = tmp_path / "no-such-folder"
    train_cell(config(), "search", 12, corpus, tmp_path / "plain")
    train_cell(config(), "search", 12, corpus, tmp_path / "zero", links_dir=missing)
    assert same_weights(tmp_path / "plain/model.pt", tmp_path / "zero/model.pt")
    supervised = config(supervised_attention=SUPERVISED)
    train_cell(config(), "encdec", 12, corpus, tmp_path / "encdec")
    metrics = train_cell(supervised, "encdec", 12, corpus, tmp_path / "encdec-sup",
                         links_dir=missing)
    assert same_weights(tmp_path / "encdec/model.pt", tmp_path / "encdec-sup/model.pt")
    assert "supervised_attention" not in metrics
    with pytest.raises(DataError, match="no-such-folder/meta.json: missing"):
        train_cell(supervised, "search", 12, corpus, tmp_path / "sup", links_dir=missing)


def attention_distance(model_path: Path, data: Path, links: Path) -> float:
    """Mean supervision loss of a model's attention against the links, over the training pairs."""
    model = load_model(model_path)
    vocab = [Vocabulary.load(data / f"vocab.{side}.txt") for side in ("src", "tgt")]
    pairs, _ = read_pairs(data, "train", *vocab)
    items = [(s, t, l) for (s, t), l in zip(pairs, read_links(links, "train", len(pairs))[0])]
    batch = collate_linked(items)
    with torch.no_grad():
        _, attention = model(batch.src, batch.src_len, batch.tgt_in)
    total, linked = supervision_loss(attention, batch.links)
    return float(total / linked)


# A transformer wide enough to tell positions apart (reversal links pair target position j
# with source position n - 1 - j: what sinusoids 8 wide barely encode), at the lr it trains at.
TRANSFORMER = {"model": "transformer", "embedding_size": 32, "hidden_size": 32, "heads": 2,
               "feedforward_size": 16}


@pytest.mark.parametrize("model, lr", [("search", 0.03), ("transformer", 0.01)])
def test_supervision_pulls_the_attention_towards_the_links_and_is_logged(model, lr, corpus,
                                                                         tmp_path):
    links = reversal_links(corpus)
    budget = {"max_steps": 40, "val_every_steps": 40, "max_epochs": 100}
    optim, models = {"lr": lr}, {"transformer": TRANSFORMER}
    train_cell(config(budget=budget, optim=optim, models=models), model, 14, corpus,
               tmp_path / "plain")
    supervised = config(budget=budget, optim=optim, models=models,
                        supervised_attention={"weight": 5.0})
    metrics = train_cell(supervised, model, 14, corpus, tmp_path / "sup", links_dir=links)
    report = metrics["supervised_attention"]
    assert report["weight"] == 5.0 and report["decay"] == 1.0 and report["links"] == "ibm1/union"
    assert report["last_attn_sup_loss"] > 0 and metrics["val_attn_sup_loss"] > 0
    plain = attention_distance(tmp_path / "plain/model.pt", corpus, links)
    pulled = attention_distance(tmp_path / "sup/model.pt", corpus, links)
    assert pulled < 0.8 * plain, (pulled, plain)


def test_a_killed_supervised_run_resumes_to_the_unbroken_runs_weights(corpus, tmp_path,
                                                                      monkeypatch):
    """The batches carry their links through the checkpoint's batch position, and the weight
    its step (halved every 4 steps: the run dies in its second period and ends in its third);
    new links are a new run (the links are part of the run's fingerprint)."""
    links = reversal_links(corpus)
    cfg = config(budget={"max_steps": 10, "val_every_steps": 3},
                 supervised_attention={"weight": 1.0, "decay": 0.5, "decay_steps": 4})
    train_cell(cfg, "search", 12, corpus, tmp_path / "unbroken", links_dir=links)
    original, dies_at_step_7 = dying_at_step(7)
    monkeypatch.setattr(TranslationTask, "training_step", dies_at_step_7)
    out = tmp_path / "killed"
    with pytest.raises(RuntimeError, match="killed"):
        train_cell(cfg, "search", 12, corpus, out, links_dir=links)
    monkeypatch.setattr(TranslationTask, "training_step", original)
    assert train_cell(cfg, "search", 12, corpus, out, links_dir=links)["resumed"] is True
    assert same_weights(tmp_path / "unbroken/model.pt", out / "model.pt")
    with pytest.raises(RuntimeError, match="killed"):
        monkeypatch.setattr(TranslationTask, "training_step", dies_at_step_7)
        train_cell(cfg, "search", 12, corpus, out, links_dir=links)
    monkeypatch.setattr(TranslationTask, "training_step", original)
    text = (links / "train.links").read_text().splitlines()
    (links / "train.links").write_text("".join(f"{line}\n" for line in [""] + text[1:]))
    assert train_cell(cfg, "search", 12, corpus, out, links_dir=links)["resumed"] is False
