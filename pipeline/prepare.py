"""DVC stage `prepare`: corpus -> cleaned, sampled train/dev/test text (data/prepared)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.data.prepare import prepare_corpus
from rnnsearch.data.textio import DataError, atomic_dir, write_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", type=Path, default=Path("data/prepared"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/prepare.json"))
    args = parser.parse_args(argv)
    try:
        cfg = load_section(PrepareConfig, "prepare", args.params)
        with atomic_dir(args.out) as tmp:
            meta = prepare_corpus(cfg, tmp)
            write_json(tmp / "meta.json", meta)
    except (ConfigError, DataError) as err:
        print(f"prepare: error: {err}", file=sys.stderr)
        return 2
    metrics = {split: {k: v for k, v in s.items() if k != "files"} for split, s in meta["splits"].items()}
    write_json(args.metrics, metrics)
    for split, stats in metrics.items():
        print(f"{split:5s}: {stats['raw_pairs']:>9,} raw, dropped {stats['dropped']}, "
              f"kept {stats['pairs']:,}")
    with tracking.start_run("prepare", cfg):
        tracking.log_numeric_metrics(metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
