"""Typed config of one translation model (one entry of ``train.models`` merged over ``train.base_model``).

A model is ``model`` (the wiring) plus a cell, sizes and an attention score:

* ``encdec``: RNNencdec (Cho et al. 2014): no attention, the encoder's final state summarises
  the source, initialises the decoder and conditions every step and the output;
* ``search``: RNNsearch (Bahdanau et al. 2015): additive attention queried with ``s_{i-1}``,
  decoder input ``[y_{i-1}; c_i]``, deep output (optionally maxout);
* ``luong``: Luong et al. 2015: attention queried with the new state ``h_t``, attentional state
  ``tanh(W_c [c_t; h_t])``, optional input feeding; ``attention`` global, local_m or local_p.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from rnnsearch.config.base import check_non_negative, check_positive, from_dict, require

MODELS = ("encdec", "search", "luong")
CELLS = ("gru", "lstm", "rnn")
SCORES = ("additive", "concat", "dot", "general", "scaled_dot")
ATTENTIONS = ("global", "local_m", "local_p")


@dataclass(frozen=True)
class ModelConfig:
    """One translation model; validated on construction through :meth:`check`."""

    model: Literal["encdec", "search", "luong"] = "search"
    cell: Literal["gru", "lstm", "rnn"] = "gru"
    embedding_size: int = 256       # E, source and target word vectors
    hidden_size: int = 256          # H, per encoder direction and in the decoder
    encoder_layers: int = 1
    decoder_layers: int = 1
    bidirectional: bool = True      # encoder annotations [h_fwd; h_bwd] (2H wide)
    dropout: float = 0.0            # on embeddings, between layers, before the output layer
    score: Literal["additive", "concat", "dot", "general", "scaled_dot"] = "additive"
    attention_size: int = 256       # width of the additive/concat score's tanh layer
    attention: Literal["global", "local_m", "local_p"] = "global"  # luong only
    window: int = 10                # D: local attention sees [p_t - D, p_t + D]
    input_feeding: bool = True      # luong: feed h~_{t-1} into the next step's input
    output_size: int = 256          # deep output width (encdec, search)
    maxout: bool = False            # deep output through maxout with pool 2 (Bahdanau's) vs tanh
    orthogonal_init: bool = True    # orthogonal recurrent matrices (per gate)

    def check(self, key: str = "model") -> None:
        """Validate names and values; errors name ``key.<field>``."""
        for name, allowed in (("model", MODELS), ("cell", CELLS), ("score", SCORES),
                              ("attention", ATTENTIONS)):
            value = getattr(self, name)
            require(value in allowed, f"{key}.{name}", f"must be one of {list(allowed)}, got {value!r}")
        check_positive(self, key, "embedding_size", "hidden_size", "encoder_layers",
                       "decoder_layers", "attention_size", "output_size", "window")
        check_non_negative(self, key, "dropout")
        require(self.dropout < 1, f"{key}.dropout", f"must be < 1, got {self.dropout}")
        if self.model == "luong" and self.score in ("dot", "scaled_dot"):
            width = self.encoder_output_size
            require(width == self.hidden_size, f"{key}.score",
                    f"'{self.score}' compares the decoder state (hidden_size {self.hidden_size}) with "
                    f"the encoder annotations ({width} wide); use bidirectional: false or "
                    "score general/concat")
        if self.model == "search":
            require(self.score in ("additive", "concat"), f"{key}.score",
                    f"search uses Bahdanau's additive score, got {self.score!r} (use model: luong)")
            require(self.attention == "global", f"{key}.attention",
                    "local attention is a Luong variant (use model: luong)")

    @property
    def encoder_output_size(self) -> int:
        """Width of one source annotation ``h_j``."""
        return self.hidden_size * (2 if self.bidirectional else 1)

    @classmethod
    def from_dict(cls, data: Any, key: str = "model") -> "ModelConfig":
        """Build from a params mapping; unknown keys and bad values fail naming ``key``."""
        return from_dict(cls, data, key)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
