"""Every params.yaml section with the dataclass that validates it, for whole-file checks."""
from __future__ import annotations

from typing import Any

from rnnsearch.config.align import AlignConfig
from rnnsearch.config.base import (check_params, check_runtime, from_dict, required_section)
from rnnsearch.errors import ConfigError
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.config.replicates import ReplicatesConfig
from rnnsearch.config.report import ReportConfig
from rnnsearch.config.senses import SensesConfig
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.config.train import TrainConfig, cell_name
from rnnsearch.config.translate import TranslateConfig

SECTIONS: dict[str, type] = {
    "prepare": PrepareConfig, "tokenize": TokenizeConfig, "embed": EmbedConfig,
    "senses": SensesConfig,
    "pretrain_lm": PretrainLMConfig, "train": TrainConfig, "translate": TranslateConfig,
    "evaluate": EvaluateConfig, "report": ReportConfig, "align": AlignConfig,
    "replicates": ReplicatesConfig,
}


def validate_params(params: dict[str, Any], origin: str = "params.yaml",
                    runtime: bool = False) -> dict[str, Any]:
    """Validate every section of ``params`` and every grid cell's model, with the checks
    across sections; returns ``{section: config}``. ``runtime``: also this machine's checks."""
    unknown = sorted(set(params) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{origin}: unknown section '{unknown[0]}' (known: {', '.join(SECTIONS)})")
    configs = {}
    for name, cls in SECTIONS.items():
        configs[name] = from_dict(cls, required_section(params, name, origin), name)
    for name, config in configs.items():
        check_params(config, name, params)
        if runtime:
            check_runtime(config, name)
    return configs


def grid_cells(train: TrainConfig) -> list[str]:
    """The grid's cell names in DVC's matrix order, e.g. ``['encdec-30', 'encdec-50', ...]``."""
    return [cell_name(m, n) for m in train.grid.models for n in train.grid.max_lens]
