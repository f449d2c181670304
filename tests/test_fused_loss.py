"""``train.trainer.fused_loss``: the output layer and the cross-entropy in one chunked pass
(:mod:`rnnsearch.training.fused_loss`) against the eager ``F.cross_entropy(F.linear(...))``."""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig, TrainConfig, TrainerConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.errors import ConfigError
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training.data import Batch, collate
from rnnsearch.training.fused_loss import linear_cross_entropy
from rnnsearch.training.harness import bare_task, device_config, train_step
from rnnsearch.training.module import TranslationTask

VOCAB = 300
# every model kind and decoder wiring: RNNsearch (tanh and maxout deep output, dropout), RNNencdec,
# Luong with input feeding (global, local-m, local-p) and without, LSTM and two decoder layers
KINDS = {
    "search": {"model": "search"},
    "search, maxout, dropout": {"model": "search", "maxout": True, "dropout": 0.3},
    "encdec": {"model": "encdec"},
    "luong global": {"model": "luong", "score": "general"},
    "luong local_m": {"model": "luong", "score": "concat", "attention": "local_m", "window": 2},
    "luong local_p": {"model": "luong", "score": "general", "attention": "local_p", "window": 2},
    "luong, no input feeding": {"model": "luong", "score": "general", "input_feeding": False},
    "search, lstm, 2 decoder layers": {"model": "search", "cell": "lstm", "decoder_layers": 2},
}


def random_features(rows: int, width: int, vocab: int, bias: bool, seed: int = 0):
    """Random features (rows x width), output weights and targets with some padding, float64."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(rows, width, generator=generator, dtype=torch.float64)
    weight = torch.randn(vocab, width, generator=generator, dtype=torch.float64)
    bias_ = torch.randn(vocab, generator=generator, dtype=torch.float64) if bias else None
    targets = torch.randint(1, vocab, (rows,), generator=generator)
    targets[::4] = PAD_ID
    return [t.requires_grad_() for t in (features, weight) + ((bias_,) if bias else ())], targets


def eager_loss(features, weight, bias, targets):
    return F.cross_entropy(F.linear(features, weight, bias), targets, ignore_index=PAD_ID,
                           reduction="sum")


@pytest.mark.parametrize("chunk_rows", [1, 7, 256])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_cross_entropy_gives_the_eager_loss_and_gradients(chunk_rows, bias):
    """Chunks smaller than, not dividing, and larger than the rows; padding rows ignored (their
    features get a zero gradient); with and without a bias; scaled by a later operation."""
    inputs, targets = random_features(37, 16, 50, bias)
    bias_ = inputs[2] if bias else None
    eager = eager_loss(inputs[0], inputs[1], bias_, targets)
    fused = linear_cross_entropy(inputs[0], inputs[1], bias_, targets, chunk_rows)
    torch.testing.assert_close(fused, eager, rtol=1e-12, atol=0)
    expected = torch.autograd.grad(eager * 0.37, inputs)
    got = torch.autograd.grad(fused * 0.37, inputs)
    for name, want, have in zip(("features", "weight", "bias"), expected, got):
        torch.testing.assert_close(have, want, rtol=1e-10, atol=1e-12, msg=name)
    assert torch.count_nonzero(got[0][targets == PAD_ID]) == 0


def test_linear_cross_entropy_passes_gradcheck_and_keeps_leading_shapes():
    inputs, targets = random_features(12, 5, 9, bias=True, seed=3)
    assert torch.autograd.gradcheck(
        lambda x, w, b: linear_cross_entropy(x, w, b, targets, chunk_rows=5), inputs)
    # batch x T x O features with batch x T targets: the flattened rows
    batch_features = inputs[0].detach().reshape(3, 4, 5)
    torch.testing.assert_close(
        linear_cross_entropy(batch_features, inputs[1], inputs[2], targets.reshape(3, 4)),
        eager_loss(inputs[0], inputs[1], inputs[2], targets))


def test_without_gradients_it_computes_the_loss_alone():
    inputs, targets = random_features(20, 6, 11, bias=True, seed=4)
    with torch.no_grad():
        loss = linear_cross_entropy(*inputs, targets)
        assert not loss.requires_grad
        torch.testing.assert_close(loss, eager_loss(*inputs, targets))


def test_under_autocast_the_products_run_in_bf16_and_the_loss_in_fp32():
    """``precision: bf16-mixed``: the fused loss equals the eager output layer's under autocast
    (bf16 logits) with its cross-entropy taken in fp32, within bf16 rounding; every gradient
    comes back in its input's dtype (the fp32 weight's in fp32)."""
    inputs, targets = random_features(300, 32, 700, bias=True, seed=5)
    features, weight, bias = (t.detach().float().requires_grad_() for t in inputs)
    bf16_features = features.detach().bfloat16().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = F.linear(bf16_features, weight, bias)
        assert logits.dtype == torch.bfloat16
        eager = F.cross_entropy(logits.float(), targets, ignore_index=PAD_ID, reduction="sum")
        fused = linear_cross_entropy(bf16_features, weight, bias, targets, chunk_rows=64)
    assert fused.dtype == torch.float32
    torch.testing.assert_close(fused, eager, rtol=1e-5, atol=0)
    expected = torch.autograd.grad(eager, (bf16_features, weight, bias))
    got = torch.autograd.grad(fused, (bf16_features, weight, bias))
    for name, want, have in zip(("features", "weight", "bias"), expected, got):
        assert have.dtype == want.dtype, name
        error = (have.double() - want.double()).norm()
        assert error <= 1e-2 * want.double().norm(), f"{name}: gradient error {float(error)}"


def random_pairs(seed: int, pairs: int = 12) -> Batch:
    rng = random.Random(seed)
    return collate([([rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 11))],
                     [rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 11))])
                    for _ in range(pairs)])


def loss_and_gradients(task: TranslationTask, batch: Batch, fused: bool, bf16: bool = False):
    """The summed training loss (dropout masks drawn from one seed) and every gradient, under
    bf16 autocast if ``bf16``."""
    task.model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        total, tokens = task.token_losses(batch, fused=fused)
    total.backward()
    return total.detach(), tokens, {name: p.grad.clone()
                                    for name, p in task.model.named_parameters()
                                    if p.grad is not None}


def assert_same_gradients(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor],
                          relative: float, of_whole: float) -> None:
    """The same parameters have gradients, and each is ``want``'s within ``relative`` of its
    own norm plus ``of_whole`` of the whole gradient's (a gradient that nearly cancels out is
    held to the whole's scale)."""
    assert got.keys() == want.keys() and "decoder.output.weight" in got
    whole = torch.cat([grad.flatten() for grad in want.values()]).norm()
    for name, grad in want.items():
        error = (got[name] - grad).norm()
        assert error <= relative * grad.norm() + of_whole * whole, f"{name}: error {float(error)}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_kind_trains_the_same_loss_and_gradients_fused(kind):
    """On random inputs, in fp32 as the models train: the fused path's loss and every
    parameter's gradient are the eager path's within float rounding, and the same parameters
    get gradients (a lost or doubled gradient would be off by its whole size)."""
    torch.manual_seed(0)
    config = ModelConfig(embedding_size=12, hidden_size=10, attention_size=9, output_size=11,
                         **KINDS[kind])
    task = TranslationTask(build_model(config, VOCAB, VOCAB).train(), OptimConfig())
    batch = random_pairs(1)
    eager, tokens, eager_grads = loss_and_gradients(task, batch, fused=False)
    fused, fused_tokens, fused_grads = loss_and_gradients(task, batch, fused=True)
    assert fused_tokens == tokens == batch.target_tokens
    torch.testing.assert_close(fused, eager, rtol=1e-6, atol=0)
    assert_same_gradients(fused_grads, eager_grads, relative=1e-5, of_whole=1e-7)


@pytest.mark.parametrize("kind", ["search", "encdec", "luong global"])
def test_every_model_kind_trains_the_same_loss_and_gradients_fused_in_bf16(kind):
    """``precision: bf16-mixed`` with the fused loss against bf16-mixed's eager loss (bf16
    logits, cross-entropy in fp32): the same loss and gradients to bf16's precision, the same
    parameters with gradients (a lost or doubled gradient would be off by its whole size)."""
    torch.manual_seed(0)
    config = ModelConfig(embedding_size=32, hidden_size=32, attention_size=32, output_size=32,
                         **KINDS[kind])
    task = TranslationTask(build_model(config, VOCAB, VOCAB).train(), OptimConfig())
    batch = random_pairs(2, pairs=16)
    eager, _, eager_grads = loss_and_gradients(task, batch, fused=False, bf16=True)
    fused, _, fused_grads = loss_and_gradients(task, batch, fused=True, bf16=True)
    torch.testing.assert_close(fused, eager, rtol=1e-3, atol=0)
    assert all(grad.dtype == torch.float32 for grad in fused_grads.values())
    assert_same_gradients(fused_grads, eager_grads, relative=2e-2, of_whole=1e-3)


@pytest.mark.parametrize("kind", ["search", "encdec", "luong global"])
def test_three_fused_training_steps_end_where_eager_ones_do(kind):
    """fp32, Adam, clipping: the train stage's step (``train.trainer.fused_loss`` through
    :func:`bare_task`) gives the eager step's losses and weights within float tolerance."""
    model = ModelConfig(embedding_size=12, hidden_size=10, attention_size=9, output_size=11,
                        **KINDS[kind])
    runs = {}
    for fused in (False, True):
        config = device_config(TrainConfig(base_model=model, models={kind: {}},
                                           optim=OptimConfig(lr=0.01, clip_norm=0.5)),
                               "cpu", fused_loss=fused)
        torch.manual_seed(0)
        task, _ = bare_task(config, build_model(config.model_config(kind), VOCAB, VOCAB))
        assert task.fused_loss is fused
        optimizer = task.configure_optimizers()
        losses = [train_step(task, optimizer, random_pairs(seed)) for seed in range(3)]
        runs[fused] = losses, task.model.state_dict()
    for eager, fused in zip(runs[False][0], runs[True][0]):
        torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)
    for name, weight in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], weight, rtol=1e-4, atol=1e-5, msg=name)


def test_fused_loss_is_refused_beside_the_bf16_cross_entropy():
    with pytest.raises(ConfigError, match="train.trainer.fused_loss: takes its loss over fp32"):
        TrainerConfig(precision="bf16-mixed", fused_loss=True,
                      bf16_cross_entropy=True).check("train.trainer")
    TrainerConfig(fused_loss=True).check("train.trainer")
    TrainerConfig(precision="bf16-mixed", fused_loss=True).check("train.trainer")
