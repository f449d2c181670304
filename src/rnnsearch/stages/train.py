"""DVC stage ``train`` (one grid cell): tokenised data -> ``data/models/<model>-<maxlen>/model.pt``
(resume state: ``.cache/resume/train/<model>-<maxlen>/``, untracked).

Trains ``--model`` on pairs of at most ``--max-len`` tokens (:mod:`rnnsearch.training.run`) and
writes ``metrics/train/<cell>.json`` (main process only under DDP); a diverged run fails."""
from __future__ import annotations

import argparse
from pathlib import Path

from rnnsearch.config.train import TrainConfig
from rnnsearch.environment import is_main_process
from rnnsearch.stages.runner import Stage, StageContext
from rnnsearch.training.run import train_cell


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="a variant named in train.models")
    parser.add_argument("--max-len", type=int, required=True, help="drop longer training pairs")
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--out", type=Path, required=True, help="data/models/<model>-<maxlen>")
    parser.add_argument("--metrics", type=Path, required=True)
    parser.add_argument("--embed-dir", type=Path, help="embed stage output (train.init.embeddings)")
    parser.add_argument("--lm", type=Path, help="pretrain_lm's decoder_init.pt (train.init.lm)")
    parser.add_argument("--links", type=Path,
                        help="align's train.links folder (train.supervised_attention)")


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Train the cell; the main process writes its metrics."""
    cfg = ctx.section(TrainConfig)
    metrics = train_cell(cfg, args.model, args.max_len, args.data, args.out, args.embed_dir,
                         args.lm, args.links, ctx.resume_root(args.out))
    if is_main_process():
        ctx.write_metrics(args.metrics, metrics)
        if "lm_fraction" in metrics:
            print(f"train: {metrics['lm_fraction']:.1%} of the decoder's parameters came from "
                  f"the language model (its word embeddings and RNN; the output layer kept its "
                  f"own init: it reads the deep output or attentional state, not the RNN state)")


STAGE = Stage("train", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
