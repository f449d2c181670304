"""A tiny translate workspace for the decoding tests: params.yaml, vocabularies, test sentences
and an untrained model. It imports torch and the project's models only (not the translate CLI,
which needs the Moses tokeniser), so the CUDA tests that use it collect with a minimal install."""
from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REPO
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.seq2seq import build_model, save_model

SRC = ["the cat sat on the mat .", "a dog sat .", "", "the zebra sat on a cat and the dog ."]
WORDS = "the a cat dog sat on mat . le la chat chien".split()


def make_workspace(root: Path, model: str = "search") -> Path:
    """params.yaml, data/tokenized (vocabularies, test.src) and data/models/<model>-50."""
    vocab = Vocabulary(SPECIALS + tuple(WORDS), (0,) * (4 + len(WORDS)))
    tokenized = root / "data" / "tokenized"
    tokenized.mkdir(parents=True)
    vocab.save(tokenized / "vocab.src.txt")
    vocab.save(tokenized / "vocab.tgt.txt")
    (tokenized / "test.src").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["translate"].update(speed_sentences=2, samples=2, sample_max_len=9, batch_size=3)
    params["translate"]["search"].update(beam_size=3, nbest=2, max_len_cap=12)
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    extra = {"bidirectional": False} if model == "encdec" else {}
    config = ModelConfig(model=model, embedding_size=8, hidden_size=8, attention_size=8,
                         output_size=8, **extra)
    save_model(build_model(config, len(vocab), len(vocab)), root / "data/models" / f"{model}-50/model.pt")
    return root
