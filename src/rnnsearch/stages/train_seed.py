"""DVC stage ``train_seed`` (one replicate of a grid cell): the cell trained exactly as ``train``
does, with ``--seed`` for ``train.seed``, into ``data/models/<model>-<maxlen>-seed<seed>/model.pt``
and ``metrics/train/<cell>-seed<seed>.json`` (resume: ``.cache/resume/train/<cell>-seed<seed>/``).

The seeds are ``replicates.seeds`` (none by default): the cell trained with ``train.seed`` and its
``train_seed`` cells are one system's replicates, which evaluate and report summarise as mean and
standard deviation (Clark et al. 2011)."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.train import TrainConfig, cell_name
from rnnsearch.errors import ConfigError
from rnnsearch.stages import train
from rnnsearch.stages.runner import Stage, StageContext, T


def add_arguments(parser: argparse.ArgumentParser) -> None:
    train.add_arguments(parser)
    parser.add_argument("--seed", type=int, required=True,
                        help="this replicate's seed (one of replicates.seeds)")


class ReplicateContext(StageContext):
    """``train``'s context with a replicate's ``train.seed``; its metrics name the replicate."""

    def __init__(self, params: str, cell: str, seed: int) -> None:
        super().__init__("train", params)
        self.cell, self.seed = cell, seed

    def section(self, cls: type[T], key: str | None = None) -> T:
        loaded = super().section(cls, key)
        if isinstance(loaded, TrainConfig):
            return dataclasses.replace(loaded, seed=self.seed)
        return loaded

    def write_metrics(self, path: Any, metrics: dict[str, Any]) -> None:
        super().write_metrics(path, {**metrics, "cell": tracking.replicate_cell(self.cell,
                                                                                self.seed),
                                     "system": self.cell, "seed": self.seed})


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Train the replicate (train's body under :class:`ReplicateContext`)."""
    if args.seed < 0:
        raise ConfigError(f"replicates.seeds: {args.seed} is negative (a seed is >= 0)")
    cell = cell_name(args.model, args.max_len)
    with tracking.replicate_of(cell, args.seed):
        train.body(args, ReplicateContext(ctx.params, cell, args.seed))


STAGE = Stage("train_seed", __doc__, add_arguments, train.STAGE.outputs, body)
