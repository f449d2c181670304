"""DVC stage ``prepare``: corpus -> cleaned, sampled train/dev/test text (``data/prepared``).

Each split is located (local mirror, cache or download), verified, cleaned and sampled (the test
split optionally stratified by length); ``meta.json`` records the languages and every split's
statistics.

``corpus: custom`` reads the files named in ``prepare.custom`` instead (see
:mod:`rnnsearch.data.custom`); every split records each file's sha256 (``inputs``). Without test
files, the test split is held out of the cleaned training pairs first (seeded, stratified when
``test_buckets`` is set), and train is sampled from what remains with every copy of a test pair
removed, so train and test never share a pair.

A split left without pairs is refused here rather than in ``tokenize``: by cleaning (the message
names its files and the ``prepare.clean`` keys that dropped its pairs) or, for the test split, by
``test_buckets`` that take none of its pairs.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.prepare import CUSTOM, PrepareConfig
from rnnsearch.data import custom
from rnnsearch.data.clean import (RULE_FIELDS, CleanRules, clean_pairs, sample_indices,
                                  stratified_indices)
from rnnsearch.data.corpora import SPLITS, get_corpus, locate
from rnnsearch.data.textio import DataError, read_parallel, write_lines
from rnnsearch.stages.runner import Stage, StageContext


def _select(cfg: PrepareConfig, split: str, src: list[str]) -> tuple[list[int], dict[str, Any]]:
    """Indices to keep for ``split`` (seeded; the test split may be stratified by length, and
    is refused when its length buckets take no pair)."""
    if split == "test" and cfg.test_buckets:
        lengths = [len(s.split()) for s in src]
        chosen, counts = stratified_indices(lengths, cfg.test_buckets, cfg.test_per_bucket, cfg.seed)
        if not chosen:
            raise DataError(f"prepare.test_buckets {list(cfg.test_buckets)}: none of the "
                            f"{len(src)} clean pairs the test split is drawn from has a source of "
                            f"at most {cfg.test_buckets[-1]} words (the shortest has "
                            f"{min(lengths)})")
        lows = (0,) + cfg.test_buckets[:-1]
        buckets = {f"{lo + 1}-{hi}": n for lo, hi, n in zip(lows, cfg.test_buckets, counts)}
        return chosen, {"per_bucket": buckets}
    size = getattr(cfg.sizes, split)
    return sample_indices(len(src), size, cfg.seed), {}


def read_split(cfg: PrepareConfig, split: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """The raw pairs of ``split`` and where they came from: ``files`` (the paths read) and, for
    a custom corpus, ``inputs`` (each file as given and its sha256)."""
    if cfg.corpus == CUSTOM:
        text = custom.read_split(getattr(cfg.custom, split).files(), f"prepare.custom.{split}",
                                 cfg.cache_dir, cfg.download)
        return text.src, text.tgt, {"files": text.paths, "inputs": text.inputs}
    corpus = get_corpus(cfg.corpus)
    paths = [locate(corpus, split, lang, cfg.mirror, cfg.cache_dir, cfg.download)
             for lang in (cfg.src_lang, cfg.tgt_lang)]
    return *read_parallel(*paths), {"files": [str(p) for p in paths]}


def read_clean(cfg: PrepareConfig, split: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """The cleaned pairs of ``split`` and their statistics (counts, then where they came from),
    with ``pairs`` left for the caller to fill in. A split that cleaning empties is refused
    here (:func:`emptied_message`), not later in ``tokenize``."""
    src, tgt, origin = read_split(cfg, split)
    rules = CleanRules(cfg.clean.min_len, cfg.clean.max_len, cfg.clean.max_ratio)
    src, tgt, dropped = clean_pairs(src, tgt, rules)
    stats = {"raw_pairs": len(src) + sum(dropped.values()), "dropped": dropped,
             "clean_pairs": len(src), "pairs": 0, **origin}
    if not src:
        raise DataError(emptied_message(split, stats, rules))
    return src, tgt, stats


def emptied_message(split: str, stats: dict[str, Any], rules: CleanRules) -> str:
    """Why cleaning left no pair of ``split``: its files, the rules that dropped its pairs and
    the params keys (with their values) to loosen."""
    drops = {reason: n for reason, n in stats["dropped"].items() if n}
    keys = [f"prepare.clean.{field} ({getattr(rules, field)})"
            for reason, field in RULE_FIELDS.items() if reason in drops]
    advice = (f"loosen {', '.join(keys)}" if keys
              else "every pair has a side without words")
    counts = ", ".join(f"{reason} {n}" for reason, n in drops.items())
    return (f"{', '.join(stats['files'])}: cleaning dropped all {stats['raw_pairs']} pairs of "
            f"the {split} split ({counts}): {advice}")


def write_split(out_dir: Path, split: str, src: list[str], tgt: list[str],
                chosen: list[int]) -> int:
    """Write the ``chosen`` pairs as ``<split>.src`` / ``<split>.tgt``; returns how many."""
    write_lines(out_dir / f"{split}.src", [src[i] for i in chosen])
    write_lines(out_dir / f"{split}.tgt", [tgt[i] for i in chosen])
    return len(chosen)


def prepare_split(cfg: PrepareConfig, split: str, out_dir: Path) -> dict[str, Any]:
    """Write ``<split>.src`` / ``<split>.tgt`` under ``out_dir``; return the split's statistics."""
    src, tgt, stats = read_clean(cfg, split)
    chosen, extra = _select(cfg, split, src)
    stats["pairs"] = write_split(out_dir, split, src, tgt, chosen)
    return {**stats, **extra}


def prepare_held_out(cfg: PrepareConfig, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Train and a test split held out of it (see the module doc); their statistics."""
    src, tgt, stats = read_clean(cfg, "train")
    test, extra = _select(cfg, "test", src)
    test_pairs = {(src[i], tgt[i]) for i in test}
    rest = [i for i in range(len(src)) if (src[i], tgt[i]) not in test_pairs]
    if not rest:
        raise DataError(f"{stats['files'][0]}: the test split held out all {len(src)} clean "
                        f"training pairs; lower prepare.sizes.test (or test_per_bucket), or "
                        f"give test files in prepare.custom.test")
    train = [rest[i] for i in sample_indices(len(rest), cfg.sizes.train, cfg.seed)]
    return {"train": {**stats, "pairs": write_split(out_dir, "train", src, tgt, train),
                      "held_out_for_test": len(src) - len(rest)},
            "test": {**stats, "pairs": write_split(out_dir, "test", src, tgt, test),
                     "held_out_from": "train", **extra}}


def prepare_corpus(cfg: PrepareConfig, out_dir: Path) -> dict[str, Any]:
    """Prepare every split into ``out_dir``; return the metadata written to ``meta.json``."""
    held_out = cfg.corpus == CUSTOM and cfg.custom.test is None
    done = prepare_held_out(cfg, out_dir) if held_out else {}
    splits = {split: done.get(split) or prepare_split(cfg, split, out_dir) for split in SPLITS}
    return {"corpus": cfg.corpus, "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang,
            "splits": splits}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("data/prepared"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/prepare.json"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Prepare every split into ``args.out`` (atomically), then metrics and the MLflow run."""
    cfg = ctx.section(PrepareConfig)
    cfg = dataclasses.replace(cfg, mirror=ctx.project_path(cfg.mirror),
                              cache_dir=ctx.project_path(cfg.cache_dir))
    with ctx.output_dir(args.out) as tmp:
        meta = prepare_corpus(cfg, tmp)
        ctx.write_json(tmp / "meta.json", meta)
    metrics = {split: {k: v for k, v in s.items() if k != "files"}
               for split, s in meta["splits"].items()}
    ctx.write_metrics(args.metrics, metrics)
    for split, stats in metrics.items():
        source = f" (held out of {stats['held_out_from']})" if "held_out_from" in stats else ""
        print(f"{split:5s}: {stats['raw_pairs']:>9,} raw, dropped {stats['dropped']}, "
              f"kept {stats['pairs']:,}{source}")
    with ctx.mlflow_run(cfg):
        tracking.log_numeric_metrics(metrics)


STAGE = Stage("prepare", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
