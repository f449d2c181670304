"""The pretrain_lm stage script: outputs per the contracts, and a vector-size mismatch between
the embed and pretrain_lm stages failing with both shapes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from rnnsearch.data.vocab import Vocabulary
from rnnsearch.lm.model import LanguageModel
from rnnsearch.models.lm_transfer import load_lm_into_decoder
from rnnsearch.stages import pretrain_lm
from rnnsearch.stages.runner import run
from test_lm_training import lm_data_dir  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[1]
PARAMS = """pretrain_lm:
  embedding_size: 8
  hidden_size: 8
  bptt: 5
  batch_size: 4
  eval_batch_size: 2
  max_steps: 6
  val_every: 3
  checkpoint_every: 3
  gradient_flow: {max_k: 4, samples: 2}
"""


def lm_main(*args: str) -> int:
    """Run the pretrain_lm stage in this process."""
    return run(pretrain_lm.STAGE, list(args))


def write_vectors(embed_dir: Path, vocab_size: int, dim: int) -> None:
    embed_dir.mkdir()
    np.save(embed_dir / "tgt.vocab.npy", np.ones((vocab_size, dim), dtype=np.float32))
    np.save(embed_dir / "tgt.mask.npy", np.arange(vocab_size) % 2 == 0)


def run_stage(data_dir: Path, tmp_path: Path, dim: int) -> int:
    vocab_size = len(Vocabulary.load(data_dir / "vocab.tgt.txt"))
    write_vectors(tmp_path / "embed", vocab_size, dim)
    (tmp_path / "params.yaml").write_text(PARAMS)
    return lm_main("--params", str(tmp_path / "params.yaml"), "--data", str(data_dir),
                   "--embed", str(tmp_path / "embed"), "--out", str(tmp_path / "lm"),
                   "--metrics", str(tmp_path / "lm.json"), "--plot", str(tmp_path / "gf.csv"))


def test_stage_writes_decoder_init_metrics_and_plot(lm_data_dir, tmp_path):  # noqa: F811
    # what a kill -9 inside a checkpoint write leaves (no process has this id): cleaned up
    abandoned = [tmp_path / "lm" / ".decoder_init.pt.tmp-999999999"]
    for folder in abandoned:
        folder.mkdir(parents=True)
        (folder / folder.name.split(".tmp")[0].lstrip(".")).write_bytes(b"half")
    assert run_stage(lm_data_dir, tmp_path, dim=8) == 0
    assert not any(folder.exists() for folder in abandoned)
    metrics = json.loads((tmp_path / "lm.json").read_text())
    assert metrics["steps"] == 6
    assert set(metrics["dev"]) == {"perplexity", "unigram_perplexity"}
    assert 0 < metrics["embedding_init_coverage"] < 1
    assert (tmp_path / "gf.csv").read_text().startswith("k,rnn,gru,lstm\n0,")
    vocab_size = len(Vocabulary.load(lm_data_dir / "vocab.tgt.txt"))
    decoder = LanguageModel("lstm", vocab_size, 8, 8)
    loaded = load_lm_into_decoder(decoder, tmp_path / "lm" / "decoder_init.pt")
    softmax = sum(p.numel() for name, p in decoder.named_parameters() if name.startswith("output."))
    total = sum(p.numel() for p in decoder.parameters())
    assert loaded == (total - softmax) / total        # all but the softmax, never copied
    resume = tmp_path / ".cache/resume/pretrain_lm/lm"     # the finished run's folder is gone
    assert resume.is_dir() and not any(resume.iterdir())
    assert torch.load(tmp_path / "lm" / "decoder_init.pt")["meta"]["vocab_size"] == vocab_size


def test_vector_size_mismatch_names_both_shapes(lm_data_dir, tmp_path, capsys):  # noqa: F811
    assert run_stage(lm_data_dir, tmp_path, dim=12) == 2
    vocab_size = len(Vocabulary.load(lm_data_dir / "vocab.tgt.txt"))
    err = capsys.readouterr().err
    assert f"({vocab_size}, 12)" in err and f"({vocab_size}, 8)" in err
    assert not (tmp_path / "lm" / "decoder_init.pt").exists()
