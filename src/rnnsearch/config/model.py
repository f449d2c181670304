"""Typed config of one translation model (a ``train.models`` entry over ``train.base_model``).

``model`` names its architecture, an entry of :data:`rnnsearch.config.architectures.ARCHITECTURES`
(docs/contributing.md says how to add one): ``encdec`` (Cho et al. 2014, no attention), ``search``
(Bahdanau et al. 2015), ``search_cond`` (Nematus's conditional GRU), ``luong`` (Luong et al. 2015:
global, local_m or local_p attention, optional input feeding)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from rnnsearch.config.architectures import (ARCHITECTURES, ATTENTIONS, SCORES,
                                            TRANSFORMER_SETTINGS, Architecture)
from rnnsearch.config.base import check_non_negative, check_positive, from_dict, require

CELLS = ("gru", "lstm", "rnn")


@dataclass(frozen=True)
class ModelConfig:
    """One translation model; validated on construction through :meth:`check`."""

    model: str = "search"           # an architecture: a name of ARCHITECTURES
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
    heads: int = 4                  # transformer: attention heads (embedding_size divisible by it)
    feedforward_size: int = 1024    # transformer: inner width of the feed-forward blocks
    alignment_layer: int = -1       # transformer: the decoder layer (from 0; -1: the last) whose
                                    # head-averaged cross-attention is the model's attention

    def check(self, key: str = "model") -> None:
        """Validate names and values; errors name ``key.<field>``."""
        for name, allowed in (("model", tuple(ARCHITECTURES)), ("cell", CELLS),
                              ("score", SCORES), ("attention", ATTENTIONS)):
            value = getattr(self, name)
            require(value in allowed, f"{key}.{name}", f"must be one of {list(allowed)}, got {value!r}")
        check_positive(self, key, "embedding_size", "hidden_size", "encoder_layers",
                       "decoder_layers", "attention_size", "output_size", "window")
        check_non_negative(self, key, "dropout")
        require(self.dropout < 1, f"{key}.dropout", f"must be < 1, got {self.dropout}")
        if self.architecture.settings == TRANSFORMER_SETTINGS:
            self._check_transformer(key)
        if self.architecture.attention and self.architecture.scores:
            self._check_attention(key)

    def _check_transformer(self, key: str) -> None:
        """Its width (``embedding_size``) split evenly over the heads; a real alignment layer."""
        check_positive(self, key, "heads", "feedforward_size")
        require(self.embedding_size % self.heads == 0, f"{key}.heads",
                f"must divide embedding_size (the transformer's width, {self.embedding_size}), "
                f"got {self.heads}")
        layers = self.decoder_layers
        require(-layers <= self.alignment_layer < layers, f"{key}.alignment_layer",
                f"must name one of the {layers} decoder layers ({-layers}..{layers - 1}), "
                f"got {self.alignment_layer}")

    def _check_attention(self, key: str) -> None:
        """The score and attention the architecture accepts; a dot score's widths."""
        for name, accepted in (("score", self.architecture.scores),
                               ("attention", self.architecture.attentions)):
            value = getattr(self, name)
            others = [model for model, arch in ARCHITECTURES.items()
                      if arch.attention and value in getattr(arch, f"{name}s")]
            hint = f" (models that accept it: {', '.join(others)})" if others else ""
            require(value in accepted, f"{key}.{name}",
                    f"model {self.model} accepts {list(accepted)}, got {value!r}{hint}")
        if self.score in ("dot", "scaled_dot"):
            width = self.encoder_output_size
            require(width == self.hidden_size, f"{key}.score",
                    f"'{self.score}' compares the decoder state (hidden_size {self.hidden_size}) with "
                    f"the encoder annotations ({width} wide); use bidirectional: false or "
                    "score general/concat")

    @property
    def architecture(self) -> Architecture:
        """The entry of :data:`ARCHITECTURES` this model is built by."""
        return ARCHITECTURES[self.model]

    @property
    def encoder_output_size(self) -> int:
        """Width of one source annotation ``h_j`` (the transformer's: ``embedding_size``)."""
        if not self.architecture.recurrent:
            return self.embedding_size
        return self.hidden_size * (2 if self.bidirectional else 1)

    @classmethod
    def from_dict(cls, data: Any, key: str = "model") -> "ModelConfig":
        """Build from a params mapping; unknown keys and bad values fail naming ``key``."""
        return from_dict(cls, data, key)

    def to_dict(self) -> dict[str, Any]:
        """Every field but those only other architectures read (:attr:`Architecture.settings`)."""
        others = {name for arch in ARCHITECTURES.values() for name in arch.settings}
        own = set(self.architecture.settings)
        return {name: value for name, value in dataclasses.asdict(self).items()
                if name in own or name not in others}
