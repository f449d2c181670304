"""DVC stage ``embed``: tokenised training text -> word2vec vectors per language (``data/embed``).

One skip-gram model per side, saved as rows aligned with the vocabulary (``<side>.vocab.npy``
and ``<side>.mask.npy``), evaluated (similarity, neighbours, PCA) and logged to MLflow. With
subword units the pieces get vectors; an evaluated word is the mean of its pieces'."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from rnnsearch import tracking
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.data.meta import read_languages
from rnnsearch.data.subword import TextUnits
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.embeddings.evaluation import (nearest_neighbours, projection_figure,
                                             subword_similarity, word_similarity)
from rnnsearch.embeddings.loading import coverage
from rnnsearch.embeddings.word2vec import read_sentences, save_side, train_word2vec
from rnnsearch.stages.runner import Stage, StageContext

SIDES = ("src", "tgt")
NEIGHBOUR_COLUMNS = ("side", "lang", "probe", "rank", "neighbour", "cosine")


@dataclass
class EmbedResult:
    """What the stage reports: metrics per side, the neighbour rows and one figure per side."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbours: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, plt.Figure] = field(default_factory=dict)


def embed_side(cfg: EmbedConfig, data_dir: Path, out_dir: Path, side: str, lang: str,
               units: TextUnits, result: EmbedResult) -> None:
    """Train, save, evaluate a side's vectors into ``result``; ``units`` splits evaluated words."""
    vocab = Vocabulary.load(data_dir / f"vocab.{side}.txt")
    model = train_word2vec(read_sentences(data_dir / f"train.{side}"), cfg, f"word2vec {lang}")
    mask = save_side(model, vocab, out_dir, side)
    metrics: dict[str, Any] = {"coverage": coverage(mask), "vocab_size": len(vocab),
                               "word2vec_words": len(model.wv)}

    def pieces_of(word: str) -> list[str]:
        return units.split([word], side)

    if lang == "en":
        metrics.update(subword_similarity(model.wv, pieces_of) if units.subwords
                       else word_similarity(model.wv))
    result.metrics[side] = metrics
    probes = getattr(cfg.probes, lang, ())
    rows = nearest_neighbours(model.wv, probes, cfg.neighbours, pieces_of)
    result.neighbours += [{"side": side, "lang": lang, **row} for row in rows]
    n_words = min(cfg.plot_words, len(model.wv))
    if n_words < 2:
        print(f"embed: {lang} ({side}): one word has a vector, so its PCA figure is a single "
              "point")
    result.figures[side] = projection_figure(
        model.wv, n_words, f"{lang} ({side}): {n_words} most frequent words, PCA of word2vec")


def embed_corpus(cfg: EmbedConfig, data_dir: Path, out_dir: Path,
                 langs: dict[str, str]) -> EmbedResult:
    """Both sides; ``langs`` maps ``src``/``tgt`` to language codes. Writes ``neighbours.tsv``.
    A subword model missing or not matching the vocabularies fails first (a ``DataError``)."""
    result = EmbedResult()
    units = TextUnits.read(data_dir)
    for side in SIDES:
        embed_side(cfg, data_dir, out_dir, side, langs[side], units, result)
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="train.{src,tgt} and vocab.{src,tgt}.txt")
    parser.add_argument("--meta", type=Path, default=Path("data/prepared/meta.json"),
                        help="the prepare stage's meta.json (src_lang, tgt_lang)")
    parser.add_argument("--out", type=Path, default=Path("data/embed"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/embed.json"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Both sides' vectors into ``args.out`` (atomically), then metrics and the MLflow run."""
    cfg = ctx.section(EmbedConfig)
    langs = read_languages(args.meta)
    with ctx.output_dir(args.out) as tmp:
        result = embed_corpus(cfg, args.data, tmp, langs)
    ctx.write_metrics(args.metrics, result.metrics)
    print(json.dumps(result.metrics, indent=2))
    with ctx.mlflow_run(cfg):
        tracking.log_numeric_metrics(result.metrics)
        log_result(result)


STAGE = Stage("embed", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
