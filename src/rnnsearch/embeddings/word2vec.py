"""Train gensim word2vec on tokenised text and align its vectors with a translation vocabulary.

gensim's ``Word2Vec`` is the whole model (spec section 2: ``sg``, ``window`` m, ``negative`` k,
``ns_exponent`` 0.75). Bit-for-bit reproducible with a fixed ``seed`` and ``workers: 1`` only:
more threads interleave their updates differently each run."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gensim.models import KeyedVectors, Word2Vec
from gensim.models.callbacks import CallbackAny2Vec
from tqdm import tqdm

from rnnsearch.config.embed import EmbedConfig
from rnnsearch.data.textio import read_lines
from rnnsearch.data.vocab import Vocabulary


def read_sentences(path: str | Path) -> list[list[str]]:
    """Tokenised sentences of a one-sentence-per-line, space-separated file."""
    return [line.split() for line in read_lines(path)]


class EpochProgress(CallbackAny2Vec):
    """A progress bar over word2vec's epochs."""

    def __init__(self, epochs: int, desc: str) -> None:
        self.bar = tqdm(total=epochs, desc=desc, unit="epoch")

    def on_epoch_end(self, model: Word2Vec) -> None:
        self.bar.update()

    def on_train_end(self, model: Word2Vec) -> None:
        self.bar.close()


def train_word2vec(sentences: list[list[str]], cfg: EmbedConfig, desc: str = "word2vec") -> Word2Vec:
    """A word2vec model trained on ``sentences`` with the hyperparameters of ``cfg``."""
    model = Word2Vec(sentences=sentences, sg=cfg.sg_flag, vector_size=cfg.vector_size,
                     window=cfg.window, negative=cfg.negative, hs=0, ns_exponent=cfg.ns_exponent,
                     min_count=cfg.min_count, epochs=cfg.epochs, workers=cfg.workers,
                     seed=cfg.seed, callbacks=[EpochProgress(cfg.epochs, desc)])
    model.callbacks = ()  # the progress bar is not part of the saved model
    return model


def vocab_arrays(kv: KeyedVectors, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Vectors in vocabulary order: float32 ``[V, d]`` (zero rows where missing), bool ``[V]``."""
    vectors = np.zeros((len(vocab), kv.vector_size), dtype=np.float32)  # V x d
    mask = np.zeros(len(vocab), dtype=bool)  # V
    for i, word in enumerate(vocab.words):
        index = kv.key_to_index.get(word)
        if index is not None:
            vectors[i] = kv.vectors[index]
            mask[i] = True
    return vectors, mask


def without_timestamps(obj: Any) -> Any:
    """``obj`` (a gensim model or KeyedVectors) without gensim's lifecycle-event timestamps and
    ``total_train_time``, so the same params and seed give the same file every run."""
    obj.lifecycle_events = None
    if hasattr(obj, "total_train_time"):
        obj.total_train_time = 0.0
    return obj


def save_side(model: Word2Vec, vocab: Vocabulary, out_dir: Path, side: str) -> np.ndarray:
    """Write ``<side>.kv``, ``<side>.w2v.model`` (training parameters and context vectors too),
    ``<side>.vocab.npy`` and ``<side>.mask.npy``; returns the mask."""
    without_timestamps(model.wv).save(str(out_dir / f"{side}.kv"))
    without_timestamps(model).save(str(out_dir / f"{side}.w2v.model"))
    vectors, mask = vocab_arrays(model.wv, vocab)
    np.save(out_dir / f"{side}.vocab.npy", vectors)
    np.save(out_dir / f"{side}.mask.npy", mask)
    return mask
