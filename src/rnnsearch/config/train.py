"""Typed ``train`` section: the model grid, named model variants, data, optimiser, budget.

Model variants are named entries of ``train.models``, each a partial :class:`ModelConfig` merged
over ``train.base_model``; ``train.grid.models`` picks which of them the DVC matrix trains."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Union

from rnnsearch.config.base import (check_non_negative, check_positive, check_seed, from_dict,
                                   require)
from rnnsearch.errors import ConfigError
from rnnsearch.config.model import ModelConfig


@dataclass(frozen=True)
class GridConfig:
    """The cells the ``train`` matrix stage trains: every model at every max length."""

    models: tuple[str, ...] = ("encdec", "search")
    max_lens: tuple[int, ...] = (30, 50)


@dataclass(frozen=True)
class DataConfig:
    batch_size: int = 64            # sentence pairs per batch (the paper: 80)
    max_padding: float = 0.1        # a batch closes before padding exceeds this fraction
    dev_max_len: int = 0            # drop longer dev pairs (0: keep all)
    dev_bleu_sentences: int = 200   # greedy dev BLEU on the first N dev pairs (0: off)

    def check(self, key: str) -> None:
        check_positive(self, key, "batch_size")
        check_non_negative(self, key, "max_padding", "dev_max_len", "dev_bleu_sentences")
        require(self.max_padding < 1, f"{key}.max_padding", "must be < 1")


@dataclass(frozen=True)
class OptimConfig:
    optimizer: Literal["adam", "adadelta"] = "adam"
    lr: float = 0.001               # Adam's step size; Adadelta's lr multiplier (the paper: 1.0)
    adadelta_rho: float = 0.95
    adadelta_eps: float = 1e-6
    weight_decay: float = 0.0
    clip_norm: float = 1.0          # gradient-norm clipping (the paper: 1; 0: off)
    position_lr_scale: float = 1.0  # local-p: lr multiplier of the window-centre predictor
    fused: bool = False             # Adam's update as one kernel per step (torch's fused=True)

    def check(self, key: str) -> None:
        require(not self.fused or self.optimizer == "adam", f"{key}.fused",
                f"only Adam has a fused update in torch; set it to false for "
                f"{key}.optimizer: {self.optimizer}")
        check_positive(self, key, "lr", "adadelta_eps", "position_lr_scale")
        check_non_negative(self, key, "weight_decay", "clip_norm")
        require(0 < self.adadelta_rho < 1, f"{key}.adadelta_rho", "must be in (0, 1)")


@dataclass(frozen=True)
class BudgetConfig:
    """When to stop: the first of max_steps, max_epochs, max_minutes (0/-1: no limit)."""

    max_steps: int = -1
    max_epochs: int = 20
    max_minutes: float = 15.0       # wall-clock cap per grid cell (Trainer max_time)
    val_every_steps: int = 250      # dev loss/perplexity (and BLEU) every N training steps
    early_stopping_patience: int = 0  # validations without improvement before stopping (0: off)
    monitor: Literal["loss", "bleu"] = "loss"  # dev metric that picks the best checkpoint

    def check(self, key: str) -> None:
        require(self.max_steps == -1 or self.max_steps > 0, f"{key}.max_steps", "must be > 0 or -1")
        check_positive(self, key, "max_epochs", "val_every_steps")
        check_non_negative(self, key, "max_minutes", "early_stopping_patience")


# Precisions the models train in: 32-bit weights, autocast to 16 bits or not ("32", "16", "bf16":
# Lightning's older names). 16-true, bf16-true, 64-true also convert every input (Lightning's
# converter refuses the frozen-dataclass batches); transformer-engine: NVIDIA's Transformer layers.
TRAINABLE_PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "32", "16", "bf16")
BF16_PRECISIONS = ("bf16-mixed", "bf16")   # autocast to bf16: the logits come out in bf16


# Names every Lightning 2.x accepts; any other value is looked up in Lightning's registries.
COMMON_CHOICES = {"accelerator": ("auto", "cpu", "gpu", "cuda"), "strategy": ("auto", "ddp"),
                  "precision": TRAINABLE_PRECISIONS}


@functools.cache
def lightning_choices() -> dict[str, tuple[str, ...]]:
    """The accelerator, strategy and precision names Lightning's own registries accept."""
    from pytorch_lightning.accelerators import AcceleratorRegistry
    from pytorch_lightning.strategies import StrategyRegistry

    try:   # the precision values Lightning's connector accepts (a private type alias)
        from lightning_fabric.connector import _PRECISION_INPUT
        precisions = [a for part in typing.get_args(_PRECISION_INPUT)
                      for a in typing.get_args(part) if isinstance(a, str)]
    except ImportError:
        precisions = ["16-true", "16-mixed", "bf16-true", "bf16-mixed", "32-true", "64-true"]
    return {"accelerator": ("auto", "gpu", *AcceleratorRegistry.available_accelerators()),
            "strategy": ("auto", *StrategyRegistry.available_strategies()),
            "precision": tuple(dict.fromkeys(precisions))}


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Silence Lightning's info lines and warnings (the real Trainer says them again)."""
    logger = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _devices_ok(devices: int | str) -> bool:
    """Lightning's ``devices``: a count > 0, -1 (all), ``auto``, or device indices ``"0,1"``."""
    if isinstance(devices, int):
        return devices > 0 or devices == -1
    text = devices.strip()
    if text == "auto" or text == "-1":
        return True
    if text.isdigit():
        return int(text) > 0
    indices = [part.strip() for part in text.split(",") if part.strip()]
    return "," in text and bool(indices) and all(part.isdigit() for part in indices)


MATMUL_PRECISIONS = ("auto", "highest", "high", "medium")


@dataclass(frozen=True)
class TrainerConfig:
    """Passed to Lightning's Trainer as they are (scale-out: devices, num_nodes, strategy: ddp)."""

    accelerator: str = "auto"      # a GPU when torch sees one, else the CPU
    devices: Union[int, str] = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    deterministic: bool = True
    log_every_steps: int = 10
    threads: int = 0                # torch CPU threads per process (0: torch's default)
    cuda_graphs: bool = False       # the attention decoder's loop replayed as CUDA graphs (GPU)
    graph_length_multiple: int = 8  # with cuda_graphs: lengths padded to a multiple of this
    bf16_cross_entropy: bool = False  # bf16-mixed: the training loss over the vocabulary in bf16
    fused_loss: bool = False        # the output layer and training loss in one chunked pass
    autocast_cache: bool = True     # with 16-mixed/bf16-mixed: each weight cast once per forward
    # float32 products: highest (fp32), high (TF32 tensor cores on a GPU), medium (bf16); auto:
    # high on a GPU, highest on the CPU (torch.set_float32_matmul_precision)
    matmul_precision: str = "auto"

    def check(self, key: str) -> None:
        """Values Lightning accepts anywhere (names from its own registries)."""
        check_positive(self, key, "num_nodes", "log_every_steps", "graph_length_multiple")
        require(not self.cuda_graphs or self.accelerator in ("gpu", "cuda", "auto"),
                f"{key}.cuda_graphs", f"needs a GPU (accelerator gpu), not {self.accelerator!r}")
        check_non_negative(self, key, "threads")
        require(self.matmul_precision in MATMUL_PRECISIONS, f"{key}.matmul_precision",
                f"must be one of {list(MATMUL_PRECISIONS)}, got {self.matmul_precision!r}")
        require(not self.bf16_cross_entropy or str(self.precision) in BF16_PRECISIONS,
                f"{key}.bf16_cross_entropy",
                f"needs precision bf16-mixed (the logits are fp32 in {self.precision!r})")
        require(not (self.fused_loss and self.bf16_cross_entropy), f"{key}.fused_loss",
                "takes its loss over fp32 log-probabilities; set one of fused_loss and "
                "bf16_cross_entropy, not both")
        require(_devices_ok(self.devices), f"{key}.devices",
                f"must be a number of devices > 0, -1 (all of them), 'auto' or device indices "
                f"such as '0,1'; got {self.devices!r}")
        for name, common in COMMON_CHOICES.items():
            value = getattr(self, name)
            if value in common:    # known without importing Lightning (seconds of each stage)
                continue
            allowed = lightning_choices()[name]
            require(value in allowed, f"{key}.{name}",
                    f"Lightning has no {name} {value!r}; use one of: {', '.join(allowed)}")
        require(str(self.precision) in TRAINABLE_PRECISIONS, f"{key}.precision",
                f"{self.precision!r} is a Lightning precision these models do not train in "
                f"(they keep 32-bit weights: full or mixed precision); use one of: "
                f"{', '.join(TRAINABLE_PRECISIONS)}")

    def check_runtime(self, key: str) -> None:
        """Lightning must set these flags up here (a GPU, torch_xla or deepspeed installed, a
        strategy fitting the accelerator); added one by one, so an error names the first bad one."""
        try:   # Lightning's own parser of these flags (private: skip if it moves)
            from pytorch_lightning.trainer.connectors.accelerator_connector import (
                _AcceleratorConnector)
        except ImportError:
            return
        flags: dict[str, Any] = {}
        for name in ("accelerator", "devices", "num_nodes", "strategy", "precision"):
            flags[name] = getattr(self, name)
            try:
                with _quiet_lightning():
                    _AcceleratorConnector(**flags)
            except Exception as err:  # Lightning raises ValueError, TypeError, ImportError,
                # RuntimeError and its MisconfigurationException (an Exception) alike
                reason = " ".join(str(err).split()) or type(err).__name__
                settings = ", ".join(f"{k}={v!r}" for k, v in flags.items())
                raise ConfigError(f"{key}.{name}: Lightning cannot use {settings} on this "
                                  f"machine: {reason}") from err


@dataclass(frozen=True)
class InitConfig:
    """Optional initialisation from earlier stages (paths come on the command line)."""

    embeddings: bool = False        # source and target embeddings from the embed stage
    lm: bool = False                # decoder from the pretrained target-side language model


@dataclass(frozen=True)
class SupervisedAttentionConfig:
    """Liu et al. (2016)'s supervised attention: ``weight * decay**k`` x the cross-entropy of the
    attention against ``align.train_links`` in period k (``decay_steps``); ``weight`` 0: off."""

    weight: float = 0.0
    decay: float = 1.0              # per period (1: a fixed weight)
    decay_steps: int = 0            # the period in optimizer steps (0: an epoch)

    def check(self, key: str) -> None:
        require(0 <= self.weight < math.inf, f"{key}.weight",
                f"must be a finite number >= 0 (0: off), got {self.weight}")
        require(0 < self.decay <= 1, f"{key}.decay",
                f"must be in (0, 1] (1: the weight stays fixed), got {self.decay}")
        require(self.decay_steps >= 0, f"{key}.decay_steps",
                f"must be >= 0 (0: the weight decays once per epoch), got {self.decay_steps}")

    @property
    def on(self) -> bool:
        """Whether any model is supervised."""
        return self.weight > 0


@dataclass(frozen=True)
class TrainConfig:
    grid: GridConfig = field(default_factory=GridConfig)
    base_model: ModelConfig = field(default_factory=ModelConfig)
    models: Any = None              # name -> overrides of base_model
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    init: InitConfig = field(default_factory=InitConfig)
    supervised_attention: SupervisedAttentionConfig = field(
        default_factory=SupervisedAttentionConfig)
    seed: int = 1234

    def check(self, key: str) -> None:
        require(isinstance(self.models, dict) and self.models, f"{key}.models",
                "expected a mapping of named model variants")
        for name in self.models:
            self.model_config(name, key)
        for i, name in enumerate(self.grid.models):
            require(name in self.models, f"{key}.grid.models[{i}]",
                    f"{name!r} is not a variant in {key}.models (known: {', '.join(self.models)})")
        for i, max_len in enumerate(self.grid.max_lens):
            require(max_len > 0, f"{key}.grid.max_lens[{i}]", f"must be > 0, got {max_len}")
        check_seed(self, key, "seed")
        self._check_supervised_models(key)

    def _check_supervised_models(self, key: str) -> None:
        """Supervised attention needs a grid model with attention (the others train as usual)."""
        if not self.supervised_attention.on:
            return
        require(any(self.supervised(name, key) for name in self.grid.models),
                f"{key}.supervised_attention.weight",
                f"is {self.supervised_attention.weight}, but no model of {key}.grid.models "
                f"({', '.join(self.grid.models)}) has attention to supervise; add one (e.g. "
                f"search) or set the weight to 0")

    def supervised(self, name: str, key: str = "train") -> bool:
        """Whether the variant ``name`` trains with supervised attention."""
        return (self.supervised_attention.on
                and self.model_config(name, key).architecture.attention)

    def check_params(self, key: str, params: dict[str, Any]) -> None:
        """With ``init.lm``, every grid model's decoder must fit ``pretrain_lm``'s LM
        (:func:`check_lm_fits`): a mismatch stops here, not after the LM's training; supervised
        attention needs the align stage's links (:func:`check_links_given`)."""
        if self.supervised_attention.on:
            check_links_given(params, f"{key}.supervised_attention.weight")
        if not self.init.lm:
            return
        lm = params.get("pretrain_lm") or {}
        for name in self.grid.models:
            check_lm_fits(self.model_config(name, key), lm, f"{key}.models.{name}")

    def check_runtime(self, key: str) -> None:
        """The Trainer's flags must work on this machine (:meth:`TrainerConfig.check_runtime`)."""
        self.trainer.check_runtime(f"{key}.trainer")

    def model_config(self, name: str, key: str = "train") -> ModelConfig:
        """The variant ``name``: its overrides merged over ``base_model``, validated."""
        if name not in (self.models or {}):
            raise ConfigError(f"{key}.models: no variant named {name!r} "
                              f"(known: {', '.join(self.models or {})})")
        overrides = self.models[name] or {}
        require(isinstance(overrides, dict), f"{key}.models.{name}", "expected a mapping")
        merged = {**dataclasses.asdict(self.base_model), **overrides}
        return from_dict(ModelConfig, merged, f"{key}.models.{name}")


LM_FIT = ("cell", "embedding_size", "hidden_size")   # what a decoder shares with pretrain_lm's LM


def check_lm_fits(model: ModelConfig, lm: dict[str, Any], key: str) -> None:
    """``train.init.lm``'s contract (rnnsearch.models.lm_transfer): the decoder's cell kind,
    embedding and hidden sizes are the language model's (``pretrain_lm``'s params, defaults
    as there), and it has at least the LM's layers; an error names both values."""
    from rnnsearch.config.pretrain_lm import PretrainLMConfig

    require(model.architecture.recurrent, f"{key}.model",
            f"is {model.model!r}, which has no recurrent decoder for train.init.lm to load the "
            f"language model into: set train.init.lm: false or leave it out of train.grid.models")
    for name in LM_FIT:
        theirs = lm.get(name, getattr(PretrainLMConfig, name))
        require(getattr(model, name) == theirs, f"{key}.{name}",
                f"is {getattr(model, name)!r} but pretrain_lm.{name} is {theirs!r}, and "
                f"train.init.lm loads the language model into the decoder: make them equal or "
                f"set train.init.lm: false")
    layers = lm.get("num_layers", PretrainLMConfig.num_layers)
    require(model.decoder_layers >= layers, f"{key}.decoder_layers",
            f"is {model.decoder_layers} but the language model has {layers} "
            f"(pretrain_lm.num_layers); train.init.lm needs a decoder layer for each")


def check_links_given(params: dict[str, Any], key: str) -> None:
    """Supervised attention (``key`` > 0) reads the links of ``align.train_links``: it must
    name them, and the models must read words (the links are between Moses words)."""
    align = params.get("align") or {}
    require(align.get("train_links") is not None, key,
            "is > 0, but align.train_links is null: name the links to supervise the attention "
            "with, e.g. align.train_links: fast_align_vb/grow-diag-final-and")
    units = (params.get("tokenize") or {}).get("units", "word")
    require(units == "word", key,
            f"is > 0, but tokenize.units is {units!r}: the align stage's links are between "
            f"Moses words; supervised attention needs tokenize.units: word")


def cell_name(model: str, max_len: int) -> str:
    """The grid cell's name: ``search-50`` (also the DVC stage suffix ``train@search-50``)."""
    return f"{model}-{max_len}"
