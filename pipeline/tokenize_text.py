"""DVC stage `tokenize`: prepared text -> Moses tokens + vocabularies (data/tokenized).

Named tokenize_text.py so that it does not shadow Python's own `tokenize` module.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.data.textio import DataError, atomic_dir, write_csv, write_json
from rnnsearch.data.tokenize_corpus import (build_vocabularies, corpus_metrics, length_figure,
                                            length_rows, tokenize_splits)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared"))
    parser.add_argument("--out", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/tokenize.json"))
    parser.add_argument("--plot", type=Path, default=Path("plots/lengths.csv"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        cfg = load_section(TokenizeConfig, "tokenize", args.params)
        with atomic_dir(args.out) as tmp:
            tokens = tokenize_splits(cfg, args.prepared, tmp)
            vocabs = build_vocabularies(cfg, tokens["train"], tmp)
    except (ConfigError, DataError, FileNotFoundError) as err:
        print(f"tokenize: error: {err}", file=sys.stderr)
        return 2
    metrics = corpus_metrics(tokens, vocabs)
    metrics["seconds"] = round(time.perf_counter() - start, 1)
    rows = length_rows(tokens["train"])
    write_json(args.metrics, metrics)
    write_csv(args.plot, rows)
    print(f"tokenize: {metrics['pairs']} pairs, vocab {metrics['vocab_size']}, "
          f"OOV {metrics['oov_rate']}, {metrics['seconds']} s")
    with tracking.start_run("tokenize", cfg):
        import mlflow

        tracking.log_numeric_metrics(metrics)
        mlflow.log_figure(length_figure(rows), "length_histogram.png")
        mlflow.log_artifact(str(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
