"""The ``pretrain_lm`` section of params.yaml: a target-side RNN language model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rnnsearch.config.base import check_non_negative, check_positive, check_seed, require


@dataclass(frozen=True)
class GradientFlowConfig:
    """The gradient-flow diagnostic: |d loss_T / d h_{T-k}| for k = 0..max_k, per cell type."""

    max_k: int = 50
    samples: int = 16

    def check(self, key: str) -> None:
        check_positive(self, key, "max_k", "samples")


@dataclass(frozen=True)
class PretrainLMConfig:
    """Model shape, truncated-BPTT training and its budget."""

    cell: Literal["lstm", "gru", "rnn"] = "lstm"
    embedding_size: int = 256
    hidden_size: int = 256
    num_layers: int = 1
    dropout: float = 0.2
    init_embeddings: bool = True
    bptt: int = 20
    batch_size: int = 32
    eval_batch_size: int = 10
    lr: float = 0.002
    clip_norm: float = 1.0
    max_steps: int = 3000
    max_minutes: float | None = 4.0
    val_every: int = 100
    checkpoint_every: int = 50
    threads: int = 1
    seed: int = 1234
    gradient_flow: GradientFlowConfig = field(default_factory=GradientFlowConfig)

    def check(self, key: str) -> None:
        check_positive(self, key, "embedding_size", "hidden_size", "num_layers", "bptt",
                       "batch_size", "eval_batch_size", "lr", "clip_norm", "val_every",
                       "checkpoint_every")
        require(0 <= self.dropout < 1, f"{key}.dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.max_steps == -1 or self.max_steps > 0, f"{key}.max_steps",
                f"must be > 0 or -1 (no step cap), got {self.max_steps}")
        if self.max_minutes is not None:
            check_positive(self, key, "max_minutes")
        require(self.max_steps > 0 or self.max_minutes is not None, f"{key}.max_steps",
                "set max_steps or max_minutes, or training never ends")
        check_non_negative(self, key, "threads")
        check_seed(self, key, "seed")
