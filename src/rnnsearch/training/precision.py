"""Lightning's ``16-mixed``/``bf16-mixed`` with autocast's weight cache (default on).

Lightning 2.6 autocasts with ``cache_enabled=False`` (older torch cached a cast made under
``no_grad`` without its history, #20251), so a recurrent decoder casts each weight once per target
word (Lightning-AI/pytorch-lightning#21611). ``train.trainer.autocast_cache`` turns the cache on;
:func:`with_weight_cache` keeps it off, warning, on a torch that would lose the history."""
from __future__ import annotations

import functools

import torch
from pytorch_lightning.plugins.precision import MixedPrecision, Precision
from pytorch_lightning.utilities import rank_zero_warn

AUTOCAST_DTYPES = {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}


def set_matmul_precision(setting: str, device_type: str) -> str:
    """Set torch's process-wide float32 matmul precision per ``train.trainer.matmul_precision``
    (``auto``: ``high``, TF32, on CUDA, else ``highest``, torch's default); returns what was set."""
    chosen = ("high" if device_type == "cuda" else "highest") if setting == "auto" else setting
    torch.set_float32_matmul_precision(chosen)
    return chosen


def mixed_autocast(device: str, precision: str, enabled: bool = True,
                   cache: bool = True) -> torch.autocast:
    """The train stage's forward autocast for ``precision`` (``16-mixed``, ``bf16-mixed``)."""
    return torch.autocast(device, dtype=AUTOCAST_DTYPES[precision], enabled=enabled,
                          cache_enabled=cache)


class CachedMixedPrecision(MixedPrecision):
    """Lightning's :class:`MixedPrecision` (same dtype, device, scaler) with autocast's weight
    cache on, entered per step's forward: each weight is cast once and no cast outlives its step."""

    def autocast_context_manager(self) -> torch.autocast:
        return mixed_autocast(self.device, self.precision)


@functools.cache
def cache_keeps_gradients() -> bool:
    """Whether this torch's autocast cache keeps the gradient of a weight first cast under a
    nested ``torch.no_grad()`` (checked on the CPU: the cache does not depend on the device)."""
    layer = torch.nn.Linear(2, 2)
    inputs = torch.ones(1, 2)
    with mixed_autocast("cpu", "bf16-mixed"):
        with torch.no_grad():
            layer(inputs)
        return layer(inputs).requires_grad


def with_weight_cache(plugin: Precision) -> Precision:
    """``plugin`` with autocast's weight cache on when it is Lightning's own
    :class:`MixedPrecision` and the cache keeps gradients; else ``plugin`` as it is."""
    if type(plugin) is not MixedPrecision:
        return plugin
    if not cache_keeps_gradients():
        rank_zero_warn(f"train.trainer.autocast_cache: torch {torch.__version__}'s autocast cache "
                       f"drops the gradients of weights first cast under torch.no_grad(); "
                       f"training without it (every use of a weight casts it anew)")
        return plugin
    return CachedMixedPrecision(plugin.precision, plugin.device, plugin.scaler)
