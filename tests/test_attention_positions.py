"""Where attention looks: the attention centre against the diagonal, local-p's window centre."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.experiments import attention_positions as positions
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.seq2seq import build_model, save_model

WORDS = "the a cat dog sat on mat . le la chat chien".split()
SRC = ["the cat sat on the mat .", "a dog sat on the mat .", "the dog .", "a cat sat on a dog ."]
TGT = ["le chat la chat .", "la chien le chat .", "le chien .", "la chat le chien le ."]


def test_a_diagonal_attention_has_no_error_and_follows_the_word_order():
    weights = np.eye(4)                                    # target word j attends source word j
    stats = positions.summarise([weights], None)
    assert stats["centre_error"] == pytest.approx(0.125)  # |j - (j + 1/2)| / 4
    assert stats["centre_correlation"] == pytest.approx(1.0)
    assert "window_centre" not in stats


def test_a_window_that_never_moves_has_no_spread_and_no_correlation():
    weights = np.full((3, 6), 1 / 6)
    stats = positions.summarise([weights], [np.zeros(3)])
    assert stats["window_centre"] == 0.0 and stats["window_spread"] == 0.0
    assert stats["window_correlation"] == 0.0
    assert stats["window_error"] == pytest.approx(np.mean([0.5, 1.5, 2.5]) * 2 / 6)


def workspace(root: Path) -> tuple[Path, dict[str, Path]]:
    """Vocabularies, a dev split and three untrained models; local-p's position predictor
    zeroed, so its window centre is exactly S * sigmoid(0) = S / 2."""
    data = root / "tokenized"
    data.mkdir()
    vocab = Vocabulary(SPECIALS + tuple(WORDS), (0,) * (4 + len(WORDS)))
    for side in ("src", "tgt"):
        vocab.save(data / f"vocab.{side}.txt")
    (data / "dev.src").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    (data / "dev.tgt").write_text("\n".join(TGT) + "\n", encoding="utf-8")
    small = dict(embedding_size=8, hidden_size=8, attention_size=8, output_size=8)
    configs = {"search": ModelConfig(model="search", **small),
               "local_p": ModelConfig(model="luong", score="general", attention="local_p",
                                      window=2, **small),
               "encdec": ModelConfig(model="encdec", bidirectional=False, **small)}
    paths = {}
    for name, config in configs.items():
        torch.manual_seed(0)
        model = build_model(config, len(vocab), len(vocab))
        if name == "local_p":
            torch.nn.init.zeros_(model.decoder.attention.position[-1].weight)
        paths[name] = root / name / "model.pt"
        save_model(model, paths[name])
    return data, paths


def test_the_command_reads_local_p_window_centres_and_skips_models_without_attention(
        tmp_path, capsys):
    data, models = workspace(tmp_path)
    status = positions.main([str(models["search"]), str(models["local_p"]), str(models["encdec"]),
                             "--data", str(data), "--min-len", "3", "--batch-size", "3",
                             "--json", str(tmp_path / "rows.json")])
    assert status == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [row["sentences"] for row in rows[:2]] == [4, 4]
    assert "window_centre" not in rows[0]
    assert rows[1]["window_centre"] == pytest.approx(0.5)   # the hook read p_t / S of every step
    assert rows[1]["window_spread"] == pytest.approx(0.0, abs=1e-7)
    assert rows[2] == {"model": str(models["encdec"]), "error": "no attention (RNNencdec)"}
    table = capsys.readouterr().out.splitlines()
    assert table[:2] == ["### Where attention looks (dev pairs)", ""]
    assert table[2].startswith("| model | sentences | centre_error") and len(table) == 7
    assert "| no attention (RNNencdec) |" in table[6] and table[5].count("0.500") == 1


def test_a_missing_split_is_named(tmp_path, capsys):
    data, models = workspace(tmp_path)
    assert positions.main([str(models["search"]), "--data", str(data), "--split", "test"]) == 2
    assert "test.src" in capsys.readouterr().err
