"""DVC stage ``prepare``: corpus -> cleaned, sampled train/dev/test text (``data/prepared``).

Each split is located (local mirror, cache or download), verified, cleaned and sampled (the test
split optionally stratified by length); ``meta.json`` records the languages and every split's
statistics.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.data.clean import CleanRules, clean_pairs, sample_indices, stratified_indices
from rnnsearch.data.corpora import SPLITS, get_corpus, locate
from rnnsearch.data.textio import read_parallel, write_lines
from rnnsearch.stages.runner import Stage, StageContext


def _select(cfg: PrepareConfig, split: str, src: list[str]) -> tuple[list[int], dict[str, Any]]:
    """Indices to keep for ``split`` (seeded; the test split may be stratified by length)."""
    if split == "test" and cfg.test_buckets:
        lengths = [len(s.split()) for s in src]
        chosen, counts = stratified_indices(lengths, cfg.test_buckets, cfg.test_per_bucket, cfg.seed)
        lows = (0,) + cfg.test_buckets[:-1]
        buckets = {f"{lo + 1}-{hi}": n for lo, hi, n in zip(lows, cfg.test_buckets, counts)}
        return chosen, {"per_bucket": buckets}
    size = getattr(cfg.sizes, split)
    return sample_indices(len(src), size, cfg.seed), {}


def prepare_split(cfg: PrepareConfig, split: str, out_dir: Path) -> dict[str, Any]:
    """Write ``<split>.src`` / ``<split>.tgt`` under ``out_dir``; return the split's statistics."""
    corpus = get_corpus(cfg.corpus)
    paths = [locate(corpus, split, lang, cfg.mirror, cfg.cache_dir, cfg.download)
             for lang in (cfg.src_lang, cfg.tgt_lang)]
    src, tgt = read_parallel(*paths)
    rules = CleanRules(cfg.clean.min_len, cfg.clean.max_len, cfg.clean.max_ratio)
    src, tgt, dropped = clean_pairs(src, tgt, rules)
    chosen, extra = _select(cfg, split, src)
    write_lines(out_dir / f"{split}.src", [src[i] for i in chosen])
    write_lines(out_dir / f"{split}.tgt", [tgt[i] for i in chosen])
    stats = {"raw_pairs": len(src) + sum(dropped.values()), "dropped": dropped,
             "clean_pairs": len(src), "pairs": len(chosen), "files": [str(p) for p in paths]}
    stats.update(extra)
    return stats


def prepare_corpus(cfg: PrepareConfig, out_dir: Path) -> dict[str, Any]:
    """Prepare every split into ``out_dir``; return the metadata written to ``meta.json``."""
    splits = {split: prepare_split(cfg, split, out_dir) for split in SPLITS}
    return {"corpus": cfg.corpus, "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang,
            "splits": splits}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("data/prepared"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/prepare.json"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Prepare every split into ``args.out`` (atomically), then metrics and the MLflow run."""
    cfg = ctx.section(PrepareConfig)
    with ctx.output_dir(args.out) as tmp:
        meta = prepare_corpus(cfg, tmp)
        ctx.write_json(tmp / "meta.json", meta)
    metrics = {split: {k: v for k, v in s.items() if k != "files"}
               for split, s in meta["splits"].items()}
    ctx.write_metrics(args.metrics, metrics)
    for split, stats in metrics.items():
        print(f"{split:5s}: {stats['raw_pairs']:>9,} raw, dropped {stats['dropped']}, "
              f"kept {stats['pairs']:,}")
    with ctx.mlflow_run(cfg):
        tracking.log_numeric_metrics(metrics)


STAGE = Stage("prepare", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
