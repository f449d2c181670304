"""The ``replicates`` section of params.yaml: more training runs of every grid cell, one per
seed (dvc.yaml's ``train_seed`` and ``translate_seed`` stages)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rnnsearch.config.base import MAX_SEED, require
from rnnsearch.config.train import TrainConfig


@dataclass(frozen=True)
class ReplicatesConfig:
    """``seeds``: the replicates' seeds besides ``train.seed`` (whose run is the first)."""

    seeds: tuple[int, ...] = ()

    def check_params(self, key: str, params: dict[str, Any]) -> None:
        first = (params.get("train") or {}).get("seed", TrainConfig.seed)
        for seed in self.seeds:
            require(0 <= seed <= MAX_SEED, f"{key}.seeds",
                    f"a seed must be in [0, {MAX_SEED}], got {seed}")
        require(len(set(self.seeds)) == len(self.seeds), f"{key}.seeds",
                f"repeats a seed: {list(self.seeds)}")
        require(first not in self.seeds, f"{key}.seeds",
                f"{first} is train.seed, whose run is the first replicate already")

    def all_seeds(self, first: int) -> list[int]:
        """Every replicate's seed: ``first`` (``train.seed``), then :attr:`seeds`."""
        return [first, *self.seeds]
