"""The Lightning side of LM training: truncated BPTT with the state carried across segments.

Each ``LMTask`` step reads one ``batch x k`` segment from the previous segment's final state,
detached (gradients reach back k steps, the forward sees the whole stream). The carried state,
epoch position and torch RNG travel in every checkpoint, so a run restored from ``last.ckpt``
continues exactly (same segments, same dropout masks). Clipping: ``gradient_clip_val``."""
from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from rnnsearch.lm.data import SegmentLoader
from rnnsearch.lm.model import LanguageModel, State, detach_state


def segment_nll(model: LanguageModel, x: torch.Tensor, y: torch.Tensor,
                state: State | None) -> tuple[torch.Tensor, int, State]:
    """Summed cross-entropy of one segment (``x``, ``y``: batch x steps), its token count and
    the model's final state (still attached to the graph)."""
    logits, state = model(x, state)  # batch x steps x V
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum")
    return nll, y.numel(), state


@torch.no_grad()
def perplexity(model: LanguageModel, loader: SegmentLoader) -> float:
    """``exp`` of the mean cross-entropy over every segment of ``loader``, state carried."""
    was_training = model.training
    model.eval()
    state, total, count = None, 0.0, 0
    for x, y in loader:
        nll, n, state = segment_nll(model, x, y, state)
        total, count = total + nll.item(), count + n
    model.train(was_training)
    return math.exp(total / count)


class LMTask(pl.LightningModule):
    """Train with truncated BPTT; log ``train/loss``, ``train/ppl`` and the dev ``val/ppl``."""

    def __init__(self, model: LanguageModel, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        self.model = model
        self.carry: State | None = None  # final state of the last training segment, detached
        self._val_carry: State | None = None
        self._val_sum, self._val_count = 0.0, 0

    def on_train_epoch_start(self) -> None:
        self.carry = None

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch  # batch x steps
        nll, count, state = segment_nll(self.model, x, y, self.carry)
        self.carry = detach_state(state)
        loss = nll / count
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/ppl", loss.detach().exp())
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val_carry, self._val_sum, self._val_count = None, 0.0, 0

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        nll, count, self._val_carry = segment_nll(self.model, *batch, self._val_carry)
        self._val_sum, self._val_count = self._val_sum + nll.item(), self._val_count + count

    def on_validation_epoch_end(self) -> None:
        loss = self._val_sum / max(self._val_count, 1)
        self.log("val/loss", loss)
        self.log("val/ppl", math.exp(loss), prog_bar=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=self.hparams.lr)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["tbptt"] = {"carry": self.carry}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("tbptt")
        if saved is not None:
            self.carry = saved["carry"]
