"""The one training harness (:mod:`rnnsearch.training.harness`) trains as the train stage does."""
from __future__ import annotations

import random
from contextlib import nullcontext
from dataclasses import replace
from functools import partial

import pytest
import pytorch_lightning as pl
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader

from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig, TrainConfig
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training.data import Batch, collate
from rnnsearch.training.harness import (NEVER, bare_trainer, device_config, shrink, train_step)
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.precision import mixed_autocast

VOCAB = 30


def tiny_train(clip_norm: float) -> TrainConfig:
    """A train section of one small RNNsearch, Adam with ``clip_norm``."""
    model = ModelConfig(embedding_size=8, hidden_size=8, attention_size=8, output_size=8)
    return TrainConfig(base_model=model, models={"search": {}},
                       optim=OptimConfig(lr=0.01, clip_norm=clip_norm))


def random_pairs(seed: int = 0, pairs: int = 6) -> list:
    """``pairs`` random sentence pairs of 2-9 words (ids of the model's vocabulary)."""
    rng = random.Random(seed)
    words = range(4, VOCAB)
    return [([rng.choice(words) for _ in range(rng.randint(2, 9))],
             [rng.choice(words) for _ in range(rng.randint(2, 9))]) for _ in range(pairs)]


def random_batch(seed: int = 0, pairs: int = 6) -> Batch:
    return collate(random_pairs(seed, pairs))


def seeded_task(config: TrainConfig, seed: int = 0) -> TranslationTask:
    """The stage's task over a model initialised from ``seed``."""
    torch.manual_seed(seed)
    return TranslationTask(build_model(config.model_config("search"), VOCAB, VOCAB), config.optim)


class LastLoss(pl.Callback):
    """Keeps the loss of the last training step."""

    loss: torch.Tensor

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.loss = outputs["loss"].detach()


def lightning_step(config: TrainConfig, batch: Batch, tmp_path, steps: int = 1
                   ) -> tuple[torch.Tensor, dict]:
    """``steps`` steps of the train stage's Trainer on ``batch`` (``config``'s ``max_steps``):
    the last one's loss and the weights after it."""
    task, loss = seeded_task(config), LastLoss()
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        bare_trainer(config, tmp_path, [loss]).fit(
            task, train_dataloaders=DataLoader([batch] * steps, batch_size=None))
    finally:
        torch.use_deterministic_algorithms(deterministic)
    return loss.loss, task.model.state_dict()


def test_the_bench_step_computes_the_train_stage_step(tmp_path):
    """Same seed, same batch: the loss of the plain step (the bench's, the studies') equals the
    Lightning step's, and so do the weights after it (clipping that bites, Adam)."""
    config = device_config(tiny_train(clip_norm=0.05), "cpu", max_steps=1)
    batch = random_batch()
    stage_loss, stage_weights = lightning_step(config, batch, tmp_path)
    task = seeded_task(config)
    loss = train_step(task, task.configure_optimizers(), batch)
    assert torch.equal(loss, stage_loss)
    weights = task.model.state_dict()
    assert same_weights(weights, stage_weights)


def test_the_step_clips_at_the_configured_norm_only():
    batch = random_batch(1)
    grads = {}
    for clip in (0.0, 0.05):
        config = tiny_train(clip)
        task = seeded_task(config)
        optimizer = torch.optim.SGD(task.model.parameters(), lr=0.0)    # leaves the weights
        train_step(task, optimizer, batch)
        grads[clip] = torch.cat([p.grad.flatten() for p in task.model.parameters()]).norm()
    assert grads[0.0] > 0.05 and abs(float(grads[0.05]) - 0.05) < 1e-4


def test_the_bench_steps_in_bf16_as_the_train_stage_steps_in_bf16_mixed(tmp_path):
    """The bench's bf16 variants train as the train stage's ``bf16-mixed`` does (its forward
    under autocast with the weight cache on, entered every step): three steps on one batch give
    the Trainer's weights bit for bit. Lightning's own autocast (cache off: each use of a weight
    cast anew, gradients summed in fp32) would not, nor one cached region around all three steps
    (the later steps would use the first step's bf16 weights); with
    ``train.trainer.autocast_cache: false`` the Trainer runs Lightning's."""
    config = device_config(tiny_train(clip_norm=1.0), "cpu", "bf16-mixed", max_steps=3)
    batch = random_batch()

    def weights_after_three_steps(forward_context, window=None) -> dict:
        task = seeded_task(config)
        optimizer = task.configure_optimizers()
        with window or nullcontext():
            for _ in range(3):
                train_step(task, optimizer, batch, forward_context())
        return task.model.state_dict()

    uncached = partial(mixed_autocast, "cpu", "bf16-mixed", cache=False)
    stage = lightning_step(config, batch, tmp_path, steps=3)[1]
    assert same_weights(weights_after_three_steps(partial(mixed_autocast, "cpu", "bf16-mixed")),
                        stage)
    assert not same_weights(weights_after_three_steps(uncached), stage)
    assert not same_weights(weights_after_three_steps(nullcontext, mixed_autocast(
        "cpu", "bf16-mixed")), stage)
    without_cache = replace(config, trainer=replace(config.trainer, autocast_cache=False))
    assert same_weights(weights_after_three_steps(uncached),
                        lightning_step(without_cache, batch, tmp_path, steps=3)[1])


def same_weights(ours: dict, theirs: dict) -> bool:
    """Whether two state dicts hold the same tensors bit for bit."""
    return ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_a_device_config_trains_only_steps_without_validation():
    train = tiny_train(1.0)
    config = device_config(train, "cuda", "bf16-mixed", 16, 5, width=4, cuda_graphs=True)
    assert (config.trainer.accelerator, config.trainer.precision, config.trainer.cuda_graphs,
            config.data.batch_size, config.budget.max_steps) == ("gpu", "bf16-mixed", True, 16, 5)
    assert config.budget.val_every_steps == NEVER and config.data.dev_bleu_sentences == 0
    assert config.base_model == shrink(train.base_model, 4) and config.base_model.hidden_size == 4
    kept = device_config(train, "cpu")
    assert kept.trainer.precision == train.trainer.precision and kept.base_model == train.base_model
    assert kept.optim == train.optim


@pytest.mark.parametrize("kind", ["search", "encdec", "luong"])
def test_fused_adam_trains_as_the_loop_within_float_tolerance(kind):
    """``train.optim.fused``: the same losses and, after three updates, the same weights as
    Adam's per-parameter loop, up to float rounding (the fused kernel orders its arithmetic
    otherwise, so not bit for bit)."""
    model = ModelConfig(model=kind, embedding_size=8, hidden_size=8, attention_size=8,
                        output_size=8, **({"score": "general"} if kind == "luong" else {}))
    runs = {}
    for fused in (False, True):
        torch.manual_seed(0)
        task = TranslationTask(build_model(model, VOCAB, VOCAB), OptimConfig(lr=0.01, fused=fused))
        optimizer = task.configure_optimizers()
        assert optimizer.defaults["fused"] is (True if fused else None)
        losses = [train_step(task, optimizer, random_batch(seed)) for seed in range(3)]
        runs[fused] = losses, task.model.state_dict()
    for loop, fused in zip(runs[False][0], runs[True][0]):
        torch.testing.assert_close(fused, loop, rtol=1e-5, atol=1e-6)
    for name, weight in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], weight, rtol=1e-5, atol=1e-6)


def test_fused_is_refused_for_adadelta():
    from rnnsearch.errors import ConfigError

    with pytest.raises(ConfigError, match="train.optim.fused: only Adam"):
        OptimConfig(optimizer="adadelta", fused=True).check("train.optim")


def model_of_kind(kind: str, width: int = 8) -> ModelConfig:
    """A small model of ``kind`` (search, encdec or luong)."""
    return ModelConfig(model=kind, embedding_size=width, hidden_size=width, attention_size=width,
                       output_size=width, **({"score": "general"} if kind == "luong" else {}))


def loss_and_gradients(task: TranslationTask, batch: Batch, in_logits_dtype: bool
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The task's summed loss on ``batch`` under bf16 autocast, and every parameter's gradient."""
    task.model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        total, _ = task.token_losses(batch, in_logits_dtype)
    total.backward()
    return total.detach(), {name: p.grad.clone() for name, p in task.model.named_parameters()
                            if p.grad is not None}


@pytest.mark.parametrize("kind", ["search", "encdec", "luong"])
def test_the_bf16_cross_entropy_computes_the_fp32_one_within_bf16_rounding(kind):
    """``train.trainer.bf16_cross_entropy``: on random inputs, under bf16 autocast, the loss and
    every parameter's gradient of the cross-entropy over the bf16 logits agree with those of
    the fp32 cross-entropy to bf16's precision (8 bits of mantissa: about 0.4%), and the same
    parameters get gradients. (A lost or doubled gradient would be off by its whole size.)"""
    torch.manual_seed(0)
    vocab = 500
    task = TranslationTask(build_model(model_of_kind(kind, 32), vocab, vocab), OptimConfig())
    rng = random.Random(1)
    batch = collate([([rng.randrange(4, vocab) for _ in range(rng.randint(3, 12))],
                      [rng.randrange(4, vocab) for _ in range(rng.randint(3, 12))])
                     for _ in range(16)])
    fp32_loss, fp32_grads = loss_and_gradients(task, batch, in_logits_dtype=False)
    bf16_loss, bf16_grads = loss_and_gradients(task, batch, in_logits_dtype=True)
    torch.testing.assert_close(bf16_loss, fp32_loss, rtol=4e-3, atol=0.0)
    assert bf16_grads.keys() == fp32_grads.keys() and fp32_grads
    whole = torch.cat([grad.flatten() for grad in fp32_grads.values()]).norm()
    for name, grad in fp32_grads.items():   # a parameter whose gradient nearly cancels out (a
        error = (bf16_grads[name] - grad).norm()   # bias of the keys) is held to the whole's scale
        assert error <= 2e-2 * grad.norm() + 1e-3 * whole, f"{name}: gradient error {float(error)}"


def test_the_bf16_cross_entropy_needs_bf16_autocast(tmp_path):
    from rnnsearch.config.train import TrainerConfig
    from rnnsearch.errors import ConfigError
    from rnnsearch.training.harness import bare_task

    with pytest.raises(ConfigError, match="train.trainer.bf16_cross_entropy: needs precision"):
        TrainerConfig(bf16_cross_entropy=True).check("train.trainer")
    TrainerConfig(precision="bf16-mixed", bf16_cross_entropy=True).check("train.trainer")
    config = device_config(tiny_train(1.0), "cpu", "bf16-mixed", bf16_cross_entropy=True)
    task, _ = bare_task(config, build_model(config.model_config("search"), VOCAB, VOCAB))
    assert task.bf16_cross_entropy


class CountCasts(TorchDispatchMode):
    """Counts the casts to bf16 of tensors shaped ``shape`` dispatched while it is active."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape, self.casts = shape, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (func is torch.ops.aten._to_copy.default and tuple(args[0].shape) == self.shape
                and out.dtype == torch.bfloat16):
            self.casts += 1
        return out


def bf16_casts_of(task: TranslationTask, shape: tuple[int, ...], target_words: int) -> int:
    """How many casts to bf16 of tensors shaped ``shape`` one forward and backward of ``task``
    under bf16 autocast makes, on 4 random pairs whose targets have ``target_words`` words."""
    rng = random.Random(0)
    batch = collate([([rng.randrange(4, VOCAB) for _ in range(6)],
                      [rng.randrange(4, VOCAB) for _ in range(target_words)]) for _ in range(4)])
    counter = CountCasts(shape)
    with mixed_autocast("cpu", "bf16-mixed"), counter:
        total, _ = task.token_losses(batch)
    total.backward()
    return counter.casts


@pytest.mark.parametrize("kind", ["search", "luong"])
def test_bf16_autocast_casts_the_recurrent_input_weights_once_per_batch(kind):
    """The decoder's first-layer weights of its non-word input (RNNsearch: the context; Luong:
    the fed attentional state) are cast to bf16 once per batch under autocast, as autocast's
    weight cache casts a parameter, not once per target word: as many casts for 9 target words
    as for 3. (Under the train stage's autocast, weight cache on, so that the parameters of
    that shape, Luong's recurrent weights, are cast once too.)"""
    torch.manual_seed(0)
    task = TranslationTask(build_model(model_of_kind(kind, 16), VOCAB, VOCAB), OptimConfig())
    extra = task.model.decoder.rnn.weight_ih_l0[:, 16:]          # past the word embedding
    short, long = (bf16_casts_of(task, tuple(extra.shape), words) for words in (3, 9))
    assert short == long >= 1


@pytest.mark.parametrize("kind", ["search", "luong"])
def test_bf16_autocast_casts_the_annotations_once_per_batch(kind):
    """The encoder's annotations (and their keys), which every target word's attention reads,
    are cast to bf16 once per batch under autocast, not at each word: as many casts of the
    batch x source length x 2H annotations for 9 target words as for 3."""
    torch.manual_seed(0)
    task = TranslationTask(build_model(model_of_kind(kind, 16), VOCAB, VOCAB), OptimConfig())
    annotations = (4, 6, 2 * 16)              # bf16_casts_of's batch: 4 sources of 6 words
    short, long = (bf16_casts_of(task, annotations, words) for words in (3, 9))
    assert short == long >= 1
