"""The train stage's mixed precision: Lightning's, with autocast's weight cache on."""
from __future__ import annotations

from dataclasses import replace

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.plugins.precision import MixedPrecision
from torch.utils.data import DataLoader

from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import TrainConfig
from rnnsearch.training import precision
from rnnsearch.training.harness import bare_trainer, device_config
from rnnsearch.training.precision import CachedMixedPrecision, mixed_autocast, with_weight_cache


def tiny_config(precision_name: str, autocast_cache: bool = True, steps: int = 1) -> TrainConfig:
    """A CPU train section of one small RNNsearch in ``precision_name`` for ``steps`` steps."""
    model = ModelConfig(embedding_size=8, hidden_size=8, attention_size=8, output_size=8)
    config = device_config(TrainConfig(base_model=model, models={"search": {}}), "cpu",
                           precision_name, max_steps=steps)
    return replace(config, trainer=replace(config.trainer, autocast_cache=autocast_cache))


@pytest.mark.parametrize("precision_name, cache, plugin", [
    ("bf16-mixed", True, CachedMixedPrecision), ("bf16-mixed", False, MixedPrecision),
    ("32-true", True, pl.plugins.precision.Precision)])
def test_the_trainer_casts_each_weight_once_unless_told_not_to(tmp_path, precision_name, cache,
                                                               plugin):
    trainer = bare_trainer(tiny_config(precision_name, cache), tmp_path, [])
    assert type(trainer.precision_plugin) is plugin
    if cache and precision_name == "bf16-mixed":
        with trainer.precision_plugin.forward_context():
            assert torch.is_autocast_cache_enabled()
            assert torch.get_autocast_dtype("cpu") == torch.bfloat16


def test_the_cached_plugin_keeps_lightnings_device_and_scaler():
    scaler = torch.amp.GradScaler("cpu")
    cached = with_weight_cache(MixedPrecision("16-mixed", "cpu", scaler))
    assert isinstance(cached, CachedMixedPrecision)
    assert (cached.precision, cached.device, cached.scaler) == ("16-mixed", "cpu", scaler)
    with cached.forward_context():
        assert torch.get_autocast_dtype("cpu") == torch.float16


def test_a_torch_whose_cache_drops_gradients_keeps_lightnings_autocast(monkeypatch):
    monkeypatch.setattr(precision, "cache_keeps_gradients", lambda: False)
    plugin = MixedPrecision("bf16-mixed", "cpu")
    with pytest.warns(UserWarning, match="train.trainer.autocast_cache: torch .* drops"):
        assert with_weight_cache(plugin) is plugin


def test_the_installed_torch_caches_casts_with_their_gradients():
    """The premise of the cache (Lightning-AI/pytorch-lightning#20251): a weight first cast
    under a nested ``torch.no_grad()`` still gets its gradient from a later use."""
    assert precision.cache_keeps_gradients()
    layer = torch.nn.Linear(3, 2)
    with mixed_autocast("cpu", "bf16-mixed"):
        with torch.no_grad():
            layer(torch.ones(1, 3))
        out = layer(torch.ones(1, 3)).float().sum()
    out.backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0


class NoGradFirst(pl.LightningModule):
    """A training step that runs its layer under ``torch.no_grad()`` before the use that
    carries the loss (a teacher pass, a detached target); keeps the weight's gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)
        self.grad: torch.Tensor | None = None

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        with torch.no_grad():
            target = self.layer(batch)
        return (self.layer(batch) - target.detach() + 1).float().pow(2).mean()

    def on_after_backward(self) -> None:
        self.grad = self.layer.weight.grad.clone()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_the_stage_trainer_keeps_gradients_of_weights_cast_under_no_grad(tmp_path):
    module = NoGradFirst()
    bare_trainer(tiny_config("bf16-mixed"), tmp_path, []).fit(
        module, train_dataloaders=DataLoader([torch.ones(2, 4)], batch_size=None))
    assert module.grad is not None and module.grad.abs().sum() > 0


@pytest.mark.parametrize("setting, on_cpu, on_cuda", [
    ("auto", "highest", "high"), ("highest", "highest", "highest"), ("medium", "medium", "medium")])
def test_matmul_precision_auto_is_tf32_on_a_gpu_and_full_fp32_on_the_cpu(setting, on_cpu,
                                                                         on_cuda):
    before = torch.get_float32_matmul_precision()
    try:
        assert precision.set_matmul_precision(setting, "cpu") == on_cpu
        assert torch.get_float32_matmul_precision() == on_cpu
        assert precision.set_matmul_precision(setting, "cuda") == on_cuda
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_trainer_sets_the_matmul_precision_and_the_metrics_name_it(tmp_path):
    """train.trainer.matmul_precision reaches torch when the stage's Trainer is made, and the
    environment block every metrics file carries records it; a bad value names the key."""
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainerConfig
    from rnnsearch.environment import describe_environment
    from rnnsearch.errors import ConfigError

    before = torch.get_float32_matmul_precision()
    config = tiny_config("32-true")
    try:
        bare_trainer(replace(config, trainer=replace(config.trainer, matmul_precision="medium")),
                     tmp_path, [])
        assert describe_environment()["float32_matmul_precision"] == "medium"
        bare_trainer(config, tmp_path, [])                        # auto, on the CPU
        assert describe_environment()["float32_matmul_precision"] == "highest"
    finally:
        torch.set_float32_matmul_precision(before)
    with pytest.raises(ConfigError, match=r"train\.trainer\.matmul_precision: must be one of"):
        from_dict(TrainerConfig, {"matmul_precision": "tf32"}, "train.trainer")
