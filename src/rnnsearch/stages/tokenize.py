"""DVC stage ``tokenize``: Moses tokens or subword pieces and vocabularies (``data/tokenized``).

With ``tokenize.units: word`` the units are the prepared text's Moses tokens; with ``bpe`` or
``unigram`` a SentencePiece model learnt on the Moses-tokenised training split (per side, or joint)
splits them into pieces (:mod:`rnnsearch.data.subword`). Measures pairs, OOV rates, lengths and
subword splits (``metrics/tokenize.json``), the length histogram (``plots/lengths.csv``, MLflow)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.base import require
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.data.corpora import SPLITS
from rnnsearch.data.meta import read_languages
from rnnsearch.data.subword import (SubwordSpec, VocabularyUnfit, letter_counts, load_model,
                                    model_file, piece_vocabulary, segment, shared_letters,
                                    train_model, unseen_characters, word_split_stats,
                                    write_models)
from rnnsearch.data.textio import read_lines, write_csv, write_lines
from rnnsearch.data.tokenize import (count_words, length_histogram, length_stats, oov_rate,
                                     tokenize_lines, unknown_language_notice)
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.errors import ConfigError
from rnnsearch.stages.runner import Stage, StageContext

SIDES = ("src", "tgt")
KEY = "tokenize"
MIN_SHARED_LETTERS = 0.5   # a joint model's two sides must share at least this (shared_letters)

Lines = dict[str, dict[str, list[str]]]   # split -> side -> space-joined units per sentence


def tokenize_splits(cfg: TokenizeConfig, prepared: Path, langs: dict[str, str]) -> Lines:
    """The Moses tokens of every split and side of ``prepared``."""
    return {split: {side: tokenize_lines(read_lines(prepared / f"{split}.{side}"), langs[side],
                                         cfg.lowercase, cfg.workers,
                                         desc=f"tokenize {split}.{side} ({langs[side]})")
                    for side in SIDES}
            for split in SPLITS}


def build_vocabularies(cfg: TokenizeConfig, train: dict[str, list[str]]) -> dict[str, Vocabulary]:
    """The N most frequent training words per side."""
    sizes = {"src": cfg.vocab_size_src, "tgt": cfg.vocab_size_tgt}
    return {side: Vocabulary.build(count_words(train[side]), sizes[side], cfg.min_count)
            for side in SIDES}


def learn_models(cfg: TokenizeConfig, train: dict[str, list[str]], langs: dict[str, str]
                 ) -> dict[str, bytes]:
    """A SentencePiece model per side on its training split, or a joint one on source + target."""
    if not cfg.subword.joint:
        return {side: learn_model(cfg, train[side], f"vocab_size_{side}",
                                  f"the {langs[side]} training split") for side in SIDES}
    share = shared_letters(letter_counts(train["src"]), letter_counts(train["tgt"]))
    require(share >= MIN_SHARED_LETTERS, f"{KEY}.subword.joint",
            f"the {langs['src']} and {langs['tgt']} training text share {share:.0%} of their "
            f"letters (a joint model needs one script on both sides, {MIN_SHARED_LETTERS:.0%} at "
            f"least): set it to false")
    model = learn_model(cfg, train["src"] + train["tgt"], "vocab_size_src",
                        f"the {langs['src']} and {langs['tgt']} training splits")
    return {side: model for side in SIDES}


def learn_model(cfg: TokenizeConfig, lines: list[str], size_key: str, what: str) -> bytes:
    """One model of ``cfg.<size_key>`` pieces on ``lines``; a size the text cannot give is a
    :class:`ConfigError` naming ``size_key``."""
    spec = SubwordSpec(cfg.units, getattr(cfg, size_key), cfg.subword.character_coverage,
                       cfg.subword.seed)
    print(f"tokenize: learning a {spec.model_type} model of {spec.vocab_size} pieces on {what} "
          f"({len(lines)} sentences)", flush=True)
    try:
        return train_model(lines, spec)
    except VocabularyUnfit as err:
        raise ConfigError(f"{KEY}.{size_key}: {err} ({what}, after Moses tokenisation)") from err


def subword_units(cfg: TokenizeConfig, words: Lines, langs: dict[str, str], out: Path
                  ) -> tuple[Lines, dict[str, Vocabulary]]:
    """Learn the models (into ``out``), split every sentence; returns pieces and vocabularies."""
    models = learn_models(cfg, words["train"], langs)
    write_models(out, cfg.units, models, cfg.subword.joint)
    loaded = {side: load_model(models[side], model_file(side, cfg.subword.joint))
              for side in SIDES}
    pieces = {split: {side: segment(loaded[side], lines, cfg.workers,
                                    desc=f"segment {split}.{side}")
                      for side, lines in sides.items()}
              for split, sides in words.items()}
    vocabs = {side: piece_vocabulary(loaded[side], pieces["train"][side]) for side in SIDES}
    return pieces, vocabs


def write_units(out: Path, tokens: Lines, vocabs: dict[str, Vocabulary]) -> None:
    """``<split>.<side>`` (one sentence a line) and ``vocab.<side>.txt`` into ``out``."""
    for split, sides in tokens.items():
        for side, lines in sides.items():
            write_lines(out / f"{split}.{side}", lines)
    for side, vocab in vocabs.items():
        vocab.save(out / f"vocab.{side}.txt")


def corpus_metrics(tokens: Lines, vocabs: dict[str, Vocabulary]) -> dict[str, Any]:
    """Pairs per split, vocabulary sizes, OOV token rates and length percentiles."""
    return {
        "pairs": {split: len(sides["src"]) for split, sides in tokens.items()},
        "vocab_size": {side: len(vocab) for side, vocab in vocabs.items()},
        "oov_rate": {split: {side: round(oov_rate(lines, vocabs[side]), 5)
                             for side, lines in sides.items()}
                     for split, sides in tokens.items()},
        "length": {split: {side: length_stats(lines) for side, lines in sides.items()}
                   for split, sides in tokens.items()},
    }


def subword_metrics(cfg: TokenizeConfig, pieces: Lines, vocabs: dict[str, Vocabulary]
                    ) -> dict[str, Any]:
    """The units and, per split and side, pieces per word, the share of words split and the
    share of characters the model never saw (``length`` and ``oov_rate`` count pieces)."""
    return {"units": cfg.units, "joint": cfg.subword.joint,
            "segmentation": {split: {side: {**word_split_stats(lines),
                                            "unseen_characters":
                                                round(unseen_characters(lines, vocabs[side]), 6)}
                                     for side, lines in sides.items()}
                             for split, sides in pieces.items()}}


def length_rows(train: dict[str, list[str]]) -> list[dict[str, int]]:
    """Rows ``{length, train_src, train_tgt}`` of the training length histogram."""
    hists = {side: length_histogram(lines) for side, lines in train.items()}
    longest = max(max(h) for h in hists.values())
    return [{"length": n, **{f"train_{side}": hists[side].get(n, 0) for side in SIDES}}
            for n in range(0, longest + 1)]


def length_figure(rows: list[dict[str, int]], unit: str):
    """The training length histogram in ``unit`` as a matplotlib figure, a bar series per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    lengths = [r["length"] for r in rows]
    for side, offset in zip(SIDES, (-0.2, 0.2)):
        ax.bar([n + offset for n in lengths], [r[f"train_{side}"] for r in rows], width=0.4,
               label=side)
    ax.set_xlabel(f"sentence length ({unit})")
    ax.set_ylabel("training sentences")
    ax.set_title("Training sentence lengths")
    ax.legend()
    fig.tight_layout()
    return fig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    parser.add_argument("--out", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/tokenize.json"))
    parser.add_argument("--plot", type=Path, default=Path("plots/lengths.csv"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Tokenise into ``args.out`` (atomically), then metrics, the plot and the MLflow run."""
    start = time.perf_counter()
    cfg = ctx.section(TokenizeConfig)
    langs = read_languages(args.prepared / "meta.json")
    for side, lang in langs.items():
        notice = unknown_language_notice(lang, f"prepare.{side}_lang")
        if notice:
            print(notice, file=sys.stderr)
    with ctx.output_dir(args.out) as tmp:
        tokens = tokenize_splits(cfg, args.prepared, langs)
        if cfg.subwords:
            tokens, vocabs = subword_units(cfg, tokens, langs, tmp)
        else:
            vocabs = build_vocabularies(cfg, tokens["train"])
        write_units(tmp, tokens, vocabs)
    metrics = corpus_metrics(tokens, vocabs)
    if cfg.subwords:
        metrics["subword"] = subword_metrics(cfg, tokens, vocabs)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    rows = length_rows(tokens["train"])
    ctx.write_metrics(args.metrics, metrics)
    write_csv(args.plot, rows)
    print(f"tokenize: {metrics['pairs']} pairs, {cfg.units} units, vocab {metrics['vocab_size']}, "
          f"OOV {metrics['oov_rate']}, {metrics['seconds']} s")
    with ctx.mlflow_run(cfg):
        import mlflow

        tracking.log_numeric_metrics(metrics)
        mlflow.log_figure(length_figure(rows, "pieces" if cfg.subwords else "tokens"),
                          "length_histogram.png")
        mlflow.log_artifact(str(args.plot))


STAGE = Stage("tokenize", __doc__, add_arguments,
              lambda a: [a.out, a.metrics, a.plot], body)
