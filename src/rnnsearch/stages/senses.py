"""DVC stage ``senses``: sense-split word vectors for ambiguous words (``data/senses``).

Occurrences of ``senses.words`` are clustered by context (mean of the embed vectors around
them), relabelled ``word_1`` ... ``word_k`` and word2vec is retrained on the relabelled text
(``embed`` settings); ``metrics/senses.json`` reports each sense's size, context words and
neighbours. The embed outputs are only read, so their readers stay cached. A k leaving a sense
rarer than ``embed.min_count`` is not chosen (``too_rare``); a word with no usable k is skipped."""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from gensim.models import KeyedVectors

from rnnsearch import tracking
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.config.senses import SensesConfig
from rnnsearch.data.meta import read_languages
from rnnsearch.data.subword import TextUnits, pieces_to_words
from rnnsearch.errors import DataError, NotSplit
from rnnsearch.embeddings.senses import SplitWord, describe, find_occurrences, relabel, split_word
from rnnsearch.embeddings.word2vec import read_sentences, train_word2vec, without_timestamps
from rnnsearch.reporting.senses import senses_figure, senses_table
from rnnsearch.stages.runner import Stage, StageContext

SIDES = ("src", "tgt")


def load_vectors(path: Path) -> KeyedVectors:
    """The embed stage's KeyedVectors; a missing file names itself and the stage to rerun."""
    if not path.is_file():
        raise DataError(f"{path}: file not found; rerun the embed stage (dvc repro embed)")
    return KeyedVectors.load(str(path))


def split_words(sentences: list[list[str]], words: tuple[str, ...], kv: KeyedVectors,
                cfg: SensesConfig, min_count: int, lang: str, units: str = "word"
                ) -> tuple[list[SplitWord], dict[str, str]]:
    """The words that split (each sense seen ``min_count`` times or more, so the retrained word2vec
    keeps it) and why each other did not (printed, plus :func:`in_pieces`' subword note)."""
    splits, skipped = [], {}
    occurrences = find_occurrences(sentences, words)
    pieces = in_pieces(sentences, occurrences, units)
    for word, positions in occurrences.items():
        try:
            splits.append(split_word(sentences, word, positions, kv, cfg, min_count))
        except NotSplit as why:
            skipped[word] = f"{why}{pieces.get(word, '')}"
            print(f"senses: {lang} '{word}' skipped: {skipped[word]}")
    return splits, skipped


def in_pieces(sentences: list[list[str]], occurrences: dict[str, list[Any]], units: str
              ) -> dict[str, str]:
    """For subword ``units``: the note added to the reason of each word held more often in pieces
    than whole (its count, pieces joined); word2vec, and so its senses, sees only whole units."""
    if units == "word":
        return {}
    words = Counter(word for sentence in sentences for word in pieces_to_words(sentence)
                    if word in occurrences)
    return {word: f"; the text holds it in {units} pieces, {words[word]} times as a word (pieces "
                  f"joined back), and word2vec learns the pieces' vectors (tokenize.units: "
                  f"{units})"
            for word, positions in occurrences.items() if words[word] > len(positions)}


def write_assignments(path: Path, splits: list[SplitWord]) -> None:
    """``<side>.senses.tsv``: the sense label given to every occurrence (sentence, token)."""
    lines = ["sentence\ttoken\tlabel"]
    for split in splits:
        lines += [f"{i}\t{j}\t{split.label(int(s))}"
                  for (i, j), s in zip(split.positions, split.senses)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def senses_side(cfg: SensesConfig, embed: EmbedConfig, args: argparse.Namespace, out_dir: Path,
                side: str, lang: str) -> dict[str, Any]:
    """Split, retrain (only when a word split) and describe one side; its metrics."""
    words = getattr(cfg.words, lang, ())
    result: dict[str, Any] = {"lang": lang, "retrained": False, "words": {}, "skipped": {}}
    if not words:
        return result
    started = time.perf_counter()
    sentences = read_sentences(args.data / f"train.{side}")
    single = load_vectors(args.embed / f"{side}.kv")
    splits, result["skipped"] = split_words(sentences, words, single, cfg, embed.min_count,
                                            lang, TextUnits.read(args.data).units)
    if splits:
        model = train_word2vec(relabel(sentences, splits), embed, f"word2vec {lang} (senses)")
        without_timestamps(model.wv).save(str(out_dir / f"{side}.kv"))   # reruns byte-identical
        write_assignments(out_dir / f"{side}.senses.tsv", splits)
        result["retrained"] = True
        result["words"] = {s.word: describe(s, single, model.wv, cfg.neighbours) for s in splits}
    print(f"senses: {lang} ({side}): {len(splits)} of {len(words)} words split in "
          f"{time.perf_counter() - started:.0f} s")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="train.{src,tgt}")
    parser.add_argument("--embed", type=Path, default=Path("data/embed"),
                        help="the embed stage's {src,tgt}.kv")
    parser.add_argument("--meta", type=Path, default=Path("data/prepared/meta.json"),
                        help="the prepare stage's meta.json (src_lang, tgt_lang)")
    parser.add_argument("--out", type=Path, default=Path("data/senses"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/senses.json"))


def log_result(metrics: dict[str, Any]) -> None:
    """The sense table and the PCA figure, into the active MLflow run."""
    import mlflow

    table = senses_table(metrics)
    if table.rows:
        columns = {name: [row[i] for row in table.rows] for i, name in enumerate(table.header)}
        mlflow.log_table(data=columns, artifact_file="senses/senses.json")
    fig = senses_figure(metrics)
    if fig is not None:
        mlflow.log_figure(fig, "senses/pca.png")
        plt.close(fig)


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Each side's sense vectors into ``args.out`` (atomically), then metrics and MLflow."""
    cfg = ctx.section(SensesConfig)
    embed = ctx.section(EmbedConfig, "embed")
    langs = read_languages(args.meta)
    with ctx.output_dir(args.out) as tmp:
        metrics = {side: senses_side(cfg, embed, args, tmp, side, langs[side]) for side in SIDES}
    ctx.write_metrics(args.metrics, metrics)
    print(json.dumps({side: {w: [s["size"] for s in m["senses"]] for w, m in r["words"].items()}
                      for side, r in metrics.items()}, ensure_ascii=False))
    with ctx.mlflow_run(cfg):
        tracking.log_numeric_metrics(metrics)
        log_result(metrics)


STAGE = Stage("senses", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
