"""The train stage's training outside it, so the bench and studies measure what the pipeline
trains: :func:`device_config`, :func:`bare_task`, :func:`bare_trainer`, :func:`train_step`."""
from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint
from torch.profiler import record_function

from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import TrainConfig
from rnnsearch.models.seq2seq import Seq2Seq
from rnnsearch.training.data import Batch, pad_to_shape
from rnnsearch.training.graphs import GraphedLoops
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.run import graph_padding, make_trainer, use_cuda_graphs

NEVER = 2**31 - 1       # a step interval that is never reached: no validation while training


def shrink(model: ModelConfig, width: int) -> ModelConfig:
    """``model`` with every width ``width`` (a seconds-long dry run; maxout halves the output)."""
    return dataclasses.replace(model, embedding_size=width, hidden_size=width,
                               attention_size=width,
                               output_size=width // 2 if model.maxout else width)


def device_config(train: TrainConfig, device: str, precision: str | None = None,
                  batch_size: int = 0, max_steps: int = -1, width: int = 0,
                  **trainer: Any) -> TrainConfig:
    """``train`` on one ``device`` (``cpu`` or ``cuda``) in ``precision`` with ``batch_size`` pairs
    a batch and every width ``width`` (each falsy: its own), at most ``max_steps`` steps (-1: no
    limit), no validation, dev BLEU, early stopping or time limit; ``trainer``: other
    ``train.trainer`` fields (``deterministic``, ``threads``, ``cuda_graphs``)."""
    t = train
    machine = dataclasses.replace(
        t.trainer, accelerator="gpu" if device == "cuda" else "cpu", devices=1, num_nodes=1,
        strategy="auto", precision=precision or t.trainer.precision, **trainer)
    budget = dataclasses.replace(t.budget, max_steps=max_steps, max_epochs=-1, max_minutes=0.0,
                                 val_every_steps=NEVER, early_stopping_patience=0)
    data = dataclasses.replace(t.data, batch_size=batch_size or t.data.batch_size,
                               dev_bleu_sentences=0)
    base = shrink(t.base_model, width) if width else t.base_model
    return dataclasses.replace(t, trainer=machine, budget=budget, data=data, base_model=base)


def bare_task(config: TrainConfig, model: Seq2Seq, hparams: dict[str, Any] | None = None
              ) -> tuple[TranslationTask, GraphedLoops | None]:
    """The train stage's task for ``model`` under ``config`` (no dev BLEU), and its CUDA graphs
    when ``train.trainer.cuda_graphs`` (None otherwise)."""
    graphs = use_cuda_graphs(config, model)
    task = TranslationTask(model, config.optim, hparams, None, config.trainer.log_every_steps,
                           pad_to=graph_padding(config, graphs),
                           bf16_cross_entropy=config.trainer.bf16_cross_entropy,
                           fused_loss=config.trainer.fused_loss)
    return task, graphs


def bare_trainer(config: TrainConfig, work_dir: Path, callbacks: list) -> pl.Trainer:
    """The train stage's Trainer with ``callbacks``, without MLflow and without the checkpoint
    Lightning adds by default (a paper-width checkpoint with optimiser state is a gigabyte)."""
    trainer = make_trainer(config, work_dir, False, callbacks)
    trainer.callbacks = [c for c in trainer.callbacks if not isinstance(c, Checkpoint)]
    return trainer


def train_step(task: TranslationTask, optimizer: torch.optim.Optimizer, batch: Batch,
               forward_context: AbstractContextManager | None = None) -> torch.Tensor:
    """One step as the stage's Trainer takes it (loss, backward, clip at ``train.optim.clip_norm``,
    optimiser step; phases marked for the profiler); returns the loss. ``forward_context`` (e.g.
    ``torch.autocast``) wraps only the forward: autocast keeps each weight's cast till it exits."""
    with record_function("forward"), forward_context or nullcontext():
        if task.pad_to is not None:
            batch = pad_to_shape(batch, *task.pad_to)
        total, tokens = task.training_losses(batch)
        loss = total / max(tokens, 1)
    optimizer.zero_grad(set_to_none=True)
    with record_function("backward"):
        loss.backward()
    with record_function("clip"):
        if task.optim.clip_norm:        # over the optimiser's parameters, as Lightning clips
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, task.optim.clip_norm)
    with record_function("optimizer"):
        optimizer.step()
    return loss.detach()
