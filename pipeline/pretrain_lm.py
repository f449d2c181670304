"""DVC stage `pretrain_lm`: target-side RNN language model -> data/lm/decoder_init.pt."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib.pyplot as plt

from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.data.textio import DataError, write_csv, write_json
from rnnsearch.lm.gradient_flow import curve_rows, gradient_flow, gradient_flow_figure
from rnnsearch.lm.training import load_lm_data, lm_metrics, log_results, train_lm
from rnnsearch.lm.transfer import save_decoder_init


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="{train,dev,test}.tgt and vocab.tgt.txt")
    parser.add_argument("--embed", type=Path, default=Path("data/embed"),
                        help="tgt.vocab.npy and tgt.mask.npy (used when init_embeddings is true)")
    parser.add_argument("--out", type=Path, default=Path("data/lm"),
                        help="decoder_init.pt, and the checkpoints last.ckpt and best.ckpt")
    parser.add_argument("--metrics", type=Path, default=Path("metrics/lm.json"))
    parser.add_argument("--plot", type=Path, default=Path("plots/gradient_flow.csv"))
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    args = parser.parse_args(argv)
    try:
        cfg = load_section(PretrainLMConfig, "pretrain_lm", args.params)
        data = load_lm_data(args.data)
        run = train_lm(cfg, data, args.out, args.embed if cfg.init_embeddings else None,
                       use_mlflow=not args.no_mlflow)
    except (ConfigError, DataError, OSError, ValueError) as err:
        print(f"pretrain_lm: error: {err}", file=sys.stderr)
        return 2
    metrics = lm_metrics(cfg, run, data)
    flow = cfg.gradient_flow
    curves = gradient_flow(data.train, len(data.vocab), cfg.embedding_size, cfg.hidden_size,
                           flow.max_k, flow.samples, cfg.seed)
    save_decoder_init(run.model, args.out / "decoder_init.pt")
    write_json(args.metrics, metrics)
    write_csv(args.plot, curve_rows(curves))
    print(json.dumps(metrics, indent=2))
    if run.run_id:
        figure = gradient_flow_figure(curves)
        log_results(run.run_id, metrics, curves, figure)
        plt.close(figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
