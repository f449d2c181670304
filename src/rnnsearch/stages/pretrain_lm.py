"""DVC stage ``pretrain_lm``: a target-side RNN language model -> ``data/lm/decoder_init.pt``.

Trains or resumes it, scores perplexity against an add-one unigram model and measures the
gradient flow of RNN/GRU/LSTM cells (``plots/gradient_flow.csv``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from pytorch_lightning.loggers import MLFlowLogger

from rnnsearch import tracking
from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.data.textio import write_csv
from rnnsearch.lm.gradient_flow import curve_rows, gradient_flow, gradient_flow_figure
from rnnsearch.lm.training import load_lm_data, lm_metrics, train_lm
from rnnsearch.models.lm_transfer import save_decoder_init
from rnnsearch.stages.runner import Stage, StageContext

DECODER_INIT = "decoder_init.pt"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="{train,dev,test}.tgt and vocab.tgt.txt")
    parser.add_argument("--embed", type=Path, default=Path("data/embed"),
                        help="tgt.vocab.npy and tgt.mask.npy (used when init_embeddings is true)")
    parser.add_argument("--out", type=Path, default=Path("data/lm"),
                        help="decoder_init.pt (checkpoints: .cache/resume/pretrain_lm/<out name>/)")
    parser.add_argument("--metrics", type=Path, default=Path("metrics/lm.json"))
    parser.add_argument("--plot", type=Path, default=Path("plots/gradient_flow.csv"))
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")


def mlflow_logger(run_id: str | None) -> MLFlowLogger:
    """Lightning's MLflow logger on the project's store; ``run_id`` continues a run."""
    tracking.configure()
    return MLFlowLogger(experiment_name=tracking.experiment_name(),
                        run_name=tracking.experiment_run_name("pretrain_lm"),
                        tracking_uri=tracking.tracking_uri(), tags=tracking.run_tags("pretrain_lm"),
                        run_id=run_id)


def log_results(run_id: str, metrics: dict[str, Any], curves: dict[str, list[float]]) -> None:
    """Add the final metrics and the gradient-flow curves (``grad_flow/<cell>``, step = k) and
    figure to the training run ``run_id``."""
    import mlflow

    tracking.configure()
    figure = gradient_flow_figure(curves)
    with mlflow.start_run(run_id=run_id):
        tracking.log_numeric_metrics(metrics)
        for k in range(len(next(iter(curves.values())))):
            mlflow.log_metrics({f"grad_flow/{cell}": norms[k] for cell, norms in curves.items()},
                               step=k)
        mlflow.log_figure(figure, "lm/gradient_flow.png")
    plt.close(figure)


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Train, measure, then write decoder_init.pt, the metrics and the plot."""
    cfg = ctx.section(PretrainLMConfig)
    data = load_lm_data(args.data)
    run = train_lm(cfg, data, ctx.resume_root(args.out), args.embed if cfg.init_embeddings else None,
                   make_logger=None if args.no_mlflow else mlflow_logger)
    metrics = lm_metrics(cfg, run, data)
    flow = cfg.gradient_flow
    curves = gradient_flow(data.train, len(data.vocab), cfg.embedding_size, cfg.hidden_size,
                           flow.max_k, flow.samples, cfg.seed)
    save_decoder_init(run.model, args.out / DECODER_INIT)
    ctx.write_metrics(args.metrics, metrics)
    write_csv(args.plot, curve_rows(curves))
    print(json.dumps(metrics, indent=2))
    if run.run_id:
        log_results(run.run_id, metrics, curves)


STAGE = Stage("pretrain_lm", __doc__, add_arguments,
              lambda a: [a.out / DECODER_INIT, a.metrics, a.plot], body)
