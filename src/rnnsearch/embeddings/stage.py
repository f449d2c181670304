"""The embed stage's work: one word2vec model per side, saved, evaluated and logged."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from rnnsearch.config.embed import EmbedConfig
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.embeddings.evaluation import nearest_neighbours, projection_figure, word_similarity
from rnnsearch.embeddings.loading import coverage
from rnnsearch.embeddings.word2vec import read_sentences, save_side, train_word2vec

SIDES = ("src", "tgt")
NEIGHBOUR_COLUMNS = ("side", "lang", "probe", "rank", "neighbour", "cosine")


@dataclass
class EmbedResult:
    """What the stage reports: metrics per side, the neighbour rows and one figure per side."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbours: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, plt.Figure] = field(default_factory=dict)


def embed_side(cfg: EmbedConfig, data_dir: Path, out_dir: Path, side: str, lang: str,
               result: EmbedResult) -> None:
    """Train, save and evaluate the vectors of one side (``src``/``tgt``) into ``result``."""
    vocab = Vocabulary.load(data_dir / f"vocab.{side}.txt")
    model = train_word2vec(read_sentences(data_dir / f"train.{side}"), cfg, f"word2vec {lang}")
    mask = save_side(model, vocab, out_dir, side)
    metrics: dict[str, Any] = {"coverage": coverage(mask), "vocab_size": len(vocab),
                               "word2vec_words": len(model.wv)}
    if lang == "en":
        metrics.update(word_similarity(model.wv))
    result.metrics[side] = metrics
    probes = getattr(cfg.probes, lang, ())
    rows = nearest_neighbours(model.wv, probes, cfg.neighbours)
    result.neighbours += [{"side": side, "lang": lang, **row} for row in rows]
    n_words = min(cfg.plot_words, len(model.wv))
    result.figures[side] = projection_figure(
        model.wv, n_words, f"{lang} ({side}): {n_words} most frequent words, PCA of word2vec")


def embed_corpus(cfg: EmbedConfig, data_dir: Path, out_dir: Path,
                 langs: dict[str, str]) -> EmbedResult:
    """Both sides; ``langs`` maps ``src``/``tgt`` to language codes. Writes ``neighbours.tsv``."""
    result = EmbedResult()
    for side in SIDES:
        embed_side(cfg, data_dir, out_dir, side, langs[side], result)
    lines = ["\t".join(NEIGHBOUR_COLUMNS)]
    lines += ["\t".join(str(row[c]) for c in NEIGHBOUR_COLUMNS) for row in result.neighbours]
    (out_dir / "neighbours.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return result


def log_result(result: EmbedResult) -> None:
    """Log the neighbour table and the projection figures to the active MLflow run."""
    import mlflow

    if result.neighbours:
        columns = {c: [row[c] for row in result.neighbours] for c in NEIGHBOUR_COLUMNS}
        mlflow.log_table(data=columns, artifact_file="embed/neighbours.json")
    for side, fig in result.figures.items():
        mlflow.log_figure(fig, f"embed/pca_{side}.png")
        plt.close(fig)
