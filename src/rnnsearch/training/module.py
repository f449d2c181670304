"""The LightningModule: teacher-forced token cross-entropy for a model it receives.

Metrics: ``train/loss``, ``train/tokens_per_s``, ``train/lr``, ``val/loss`` (mean dev token
cross-entropy), ``val/ppl``, ``val/bleu`` (with a dev BLEU scorer); with supervised attention also
``train/attn_sup_loss``, ``train/attn_sup_weight``, ``val/attn_sup_loss``."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from rnnsearch.config.train import OptimConfig, SupervisedAttentionConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.models.seq2seq import Seq2Seq
from rnnsearch.training.data import Batch, pad_to_shape
from rnnsearch.training.fused_loss import linear_cross_entropy
from rnnsearch.training.supervision import supervision_loss, supervision_weight

BleuScorer = Callable[[Seq2Seq], float]


class TranslationTask(pl.LightningModule):
    """Trains ``model`` (a :class:`Seq2Seq`) with teacher forcing."""

    def __init__(self, model: Seq2Seq, optim: OptimConfig, hparams: dict[str, Any] | None = None,
                 dev_bleu: BleuScorer | None = None, log_every_steps: int = 10,
                 pad_to: tuple[int, int] | None = None, bf16_cross_entropy: bool = False,
                 fused_loss: bool = False,
                 supervision: SupervisedAttentionConfig | None = None) -> None:
        """``pad_to``: (rows, length multiple) training batches are padded to, for CUDA graphs.
        ``bf16_cross_entropy``, ``fused_loss``: the ``train.trainer`` flags
        (:func:`token_cross_entropy`, :func:`linear_cross_entropy`); ``supervision``:
        ``train.supervised_attention``."""
        super().__init__()
        self.supervision = supervision
        self.model, self.optim, self.dev_bleu = model, optim, dev_bleu
        self.log_every_steps, self.pad_to = log_every_steps, pad_to
        self.bf16_cross_entropy, self.fused_loss = bf16_cross_entropy, fused_loss
        self.save_hyperparameters(hparams or {})
        self.validated_at_step = -1
        self._dev_sums = torch.zeros(2)            # summed token NLL, target tokens
        self._dev_supervision = torch.zeros(2)     # summed supervision loss, linked words
        self._tokens_seen, self.train_seconds = 0, 0.0
        self._window = (0.0, 0)                     # (train_seconds, tokens) at the last log
        self._batch_started = 0.0

    def token_losses(self, batch: Batch, in_logits_dtype: bool = False, fused: bool = False
                     ) -> tuple[torch.Tensor, int]:
        """Summed cross-entropy over the batch's real target tokens, and their number (options:
        :func:`token_cross_entropy`, :func:`linear_cross_entropy`)."""
        total, tokens, _ = self.losses_and_attention(batch, in_logits_dtype, fused)
        return total, tokens

    def losses_and_attention(self, batch: Batch, in_logits_dtype: bool = False,
                             fused: bool = False) -> tuple[torch.Tensor, int, torch.Tensor | None]:
        """:meth:`token_losses` and the attention weights (batch x T x S, or None)."""
        if fused:
            features, attention = self.model(batch.src, batch.src_len, batch.tgt_in,
                                             features=True)
            output = self.model.output_layer                              # features: batch x T x O
            total = linear_cross_entropy(features, output.weight, output.bias, batch.tgt_out)
            return total, batch.target_tokens, attention
        logits, attention = self.model(batch.src, batch.src_len, batch.tgt_in)  # batch x T x V
        total = token_cross_entropy(logits, batch.tgt_out, in_logits_dtype)
        return total, batch.target_tokens, attention

    def training_losses(self, batch: Batch) -> tuple[torch.Tensor, int]:
        """:meth:`token_losses` as the training step takes them (``bf16_cross_entropy``,
        ``fused_loss``); the dev loss is always the eager fp32 one."""
        return self.token_losses(batch, self.bf16_cross_entropy, self.fused_loss)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        if self.pad_to is not None:
            batch = pad_to_shape(batch, *self.pad_to)
        total, tokens, attention = self.losses_and_attention(batch, self.bf16_cross_entropy,
                                                             self.fused_loss)
        loss = total / max(tokens, 1)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch.src.size(0))
        self._tokens_seen += tokens
        if batch.links is not None:
            return loss + self.supervised_loss(attention, batch)
        return loss

    def supervised_loss(self, attention: torch.Tensor | None, batch: Batch) -> torch.Tensor:
        """The weighted supervision loss of ``batch``'s links (``train/attn_sup_loss``, its
        weight ``train/attn_sup_weight``; ``train/loss`` stays the cross-entropy alone)."""
        if attention is None or self.supervision is None or batch.links is None:
            raise ValueError("supervised attention needs a model with attention, the "
                             "train.supervised_attention settings and batches with links")
        total, linked = supervision_loss(attention, batch.links)
        loss = total / linked.clamp(min=1)
        cfg = self.supervision
        weight = supervision_weight(cfg.weight, cfg.decay, self.current_epoch,
                                    self.global_step, cfg.decay_steps)
        self.log_dict({"train/attn_sup_loss": loss.detach(), "train/attn_sup_weight": weight},
                      batch_size=batch.src.size(0))
        return weight * loss

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        self._batch_started = time.perf_counter()

    def on_train_batch_end(self, outputs: Any, batch: Batch, batch_idx: int) -> None:
        """Log target tokens per second inside training steps (all processes) and the lr."""
        self.train_seconds += time.perf_counter() - self._batch_started
        if self.global_step % self.log_every_steps:
            return
        seconds, seen = self._window
        rate = (self._tokens_seen - seen) / max(self.train_seconds - seconds, 1e-9)
        self._window = (self.train_seconds, self._tokens_seen)
        lr = self.trainer.optimizers[0].param_groups[0]["lr"]
        self.log_dict({"train/tokens_per_s": rate * self.trainer.world_size, "train/lr": lr})

    @property
    def tokens_per_second(self) -> float:
        """Mean training throughput since the run's start or resume, all processes together."""
        return self._tokens_seen / max(self.train_seconds, 1e-9) * self.trainer.world_size

    def on_validation_epoch_start(self) -> None:
        self._dev_sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        self._dev_supervision = torch.zeros(2, dtype=torch.float64, device=self.device)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        total, tokens, attention = self.losses_and_attention(batch)
        self._dev_sums += torch.stack([total.detach().double(),
                                       torch.tensor(float(tokens), device=self.device).double()])
        if batch.links is not None and attention is not None:
            loss, linked = supervision_loss(attention, batch.links)
            self._dev_supervision += torch.stack([loss.detach().double(), linked.double()])

    def on_validation_epoch_end(self) -> None:
        sums = self.trainer.strategy.reduce(self._dev_sums, reduce_op="sum")  # over processes
        loss = float(sums[0] / sums[1].clamp(min=1))
        metrics = {"val/loss": loss, "val/ppl": math.exp(min(loss, 50.0))}
        if self.supervision is not None:   # the dev pairs' supervision loss, unweighted
            sup = self.trainer.strategy.reduce(self._dev_supervision, reduce_op="sum")
            metrics["val/attn_sup_loss"] = float(sup[0] / sup[1].clamp(min=1))
        if self.dev_bleu is not None and not self.trainer.sanity_checking:
            bleu = self.dev_bleu(self.model) if self.trainer.is_global_zero else 0.0
            metrics["val/bleu"] = float(self.trainer.strategy.broadcast(bleu, src=0))
        self.log_dict(metrics, prog_bar=True, sync_dist=False)
        self.validated_at_step = self.global_step

    def configure_optimizers(self) -> torch.optim.Optimizer:
        o = self.optim
        groups = parameter_groups(self.model, o)
        if o.optimizer == "adadelta":
            return torch.optim.Adadelta(groups, lr=o.lr, rho=o.adadelta_rho,
                                        eps=o.adadelta_eps, weight_decay=o.weight_decay)
        return torch.optim.Adam(groups, lr=o.lr, weight_decay=o.weight_decay,
                                fused=True if o.fused else None)


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                        in_logits_dtype: bool = False) -> torch.Tensor:
    """Summed cross-entropy of ``logits`` (batch x T x V) against ``targets`` (batch x T ids;
    padding ignored), in fp32. ``in_logits_dtype``: the log-softmax in the logits' own dtype
    (bf16), skipping the fp32 copy of the logits and their gradient, which costs a CPU with AMX
    about what bf16 saves (docs/performance.md); per-token losses are then rounded to bf16."""
    flat, flat_targets = logits.flatten(0, 1), targets.flatten()        # (batch*T) x V, batch*T
    if not in_logits_dtype:
        return F.cross_entropy(flat.float(), flat_targets, ignore_index=PAD_ID, reduction="sum")
    with torch.autocast(flat.device.type, enabled=False):   # autocast would run it in fp32
        per_token = F.cross_entropy(flat, flat_targets, ignore_index=PAD_ID, reduction="none")
    return per_token.float().sum()


def parameter_groups(model: Seq2Seq, optim: OptimConfig) -> list[dict[str, Any]]:
    """The optimiser's parameter groups: one, unless ``optim.position_lr_scale`` gives local-p's
    window-centre predictor a rate of its own (under Adam, at the shared rate, it saturates and
    p_t ends pinned to one end of the sentence: docs/findings.md)."""
    position = model.position_predictor_parameters()
    if optim.position_lr_scale == 1.0 or not position:
        return [{"params": list(model.parameters())}]
    ids = {id(p) for p in position}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [{"params": rest}, {"params": position, "lr": optim.lr * optim.position_lr_scale}]
