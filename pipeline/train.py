"""DVC stage `train` (one matrix cell): tokenised data -> data/models/<model>-<maxlen>/ + metrics."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.train import TrainConfig
from rnnsearch.training import train_cell


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--model", required=True, help="a variant named in train.models")
    parser.add_argument("--max-len", type=int, required=True, help="drop longer training pairs")
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--out", type=Path, required=True, help="data/models/<model>-<maxlen>")
    parser.add_argument("--metrics", type=Path, required=True)
    parser.add_argument("--embed-dir", type=Path, help="embed stage output (train.init.embeddings)")
    parser.add_argument("--lm", type=Path, help="pretrain_lm's decoder_init.pt (train.init.lm)")
    args = parser.parse_args(argv)
    try:
        cfg = load_section(TrainConfig, "train", args.params)
        metrics = train_cell(cfg, args.model, args.max_len, args.data, args.out,
                             args.embed_dir, args.lm)
    except (ConfigError, FileNotFoundError, ValueError) as err:
        print(f"train: error: {err}", file=sys.stderr)
        return 2
    if metrics.get("is_global_zero", True):
        args.metrics.parent.mkdir(parents=True, exist_ok=True)
        args.metrics.write_text(json.dumps(metrics, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
