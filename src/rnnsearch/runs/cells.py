"""One grid cell of an experiment's branch, fetched from the DVC cache: translate with it, or
read a Transformer cell's attention AER from each decoder layer."""
from __future__ import annotations

import subprocess
import sys

from rnnsearch.config.base import parse_params
from rnnsearch.errors import ConfigError
from rnnsearch.runs.branches import fetch_cell, file_at, trained_cell
from rnnsearch.runs.comparison import attention_counts_at


def layer_aers(name: str, cell: str) -> list[dict[str, float]]:
    """Per decoder layer, first first: the AER of Transformer ``cell``'s cross-attention."""
    from rnnsearch.alignment.aer import aer_of_counts
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    root, ref = trained_cell(name, cell)
    params = parse_params(file_at(root, ref, "params.yaml"), f"{ref}:params.yaml")
    model = from_dict(TrainConfig, params.get("train", {}), "train").model_config(
        cell.rpartition("-")[0])
    if model.model != "transformer":
        raise ConfigError(f"{cell} of {ref} is a '{model.model}' model: only a Transformer has "
                          f"layers of attention to choose from")
    return [{variant: float(aer_of_counts(counts.sum(0))) for variant, counts in
             attention_counts_at(root, ref, name, [cell], layer)[cell].items()}
            for layer in range(model.decoder_layers)]


def translate(name: str, cell: str, options: list[str]) -> int:
    """Translate with ``cell`` of preset ``name``, fetched from the DVC cache; ``options``: the
    translation command line's (input file, --method, ...), run as a process of its own."""
    from rnnsearch.runs.cache import TOKENIZED, model_path

    root, ref = trained_cell(name, cell)
    folder = fetch_cell(root, ref, cell, name)
    return subprocess.call([sys.executable, "-m", "rnnsearch.decoding.cli", *options,
                            "--model", str(folder / model_path(cell)),
                            "--vocab-dir", str(folder / TOKENIZED),
                            "--params", str(folder / "params.yaml")])
