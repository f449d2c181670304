"""Arithmetic of a translation model from its layer shapes: :class:`Gemm` terms ``[m x k] @
[k x n]``, each run ``per_token`` times per *target* token (encoder terms scaled by the
source/target length ratio, attention terms by the source length; ``m`` decides the measured
rate, :mod:`rnnsearch.bench.gemm`). A multiply-add is two FLOPs; training is three times the
forward; element-wise work, softmax and lookups (a few per cent) are left out. Terms follow the
decoder class of the architecture entry (:data:`WIRINGS`); an uncounted decoder is refused."""
from __future__ import annotations

from dataclasses import dataclass

from rnnsearch.config.model import ModelConfig
from rnnsearch.errors import ConfigError

GATES = {"gru": 3, "lstm": 4, "rnn": 1}
TRAIN_FACTOR = 3  # forward + backward (two products per forward product)
# The wiring each decoder class runs: Bahdanau's (with or without attention), the conditional
# GRU's (Bahdanau's plus a second transition reading the context), Luong's, the Transformer's.
WIRINGS = {"rnnsearch.models.decoder:BahdanauDecoder": "bahdanau",
           "rnnsearch.models.decoder:ConditionalDecoder": "conditional",
           "rnnsearch.models.decoder:LuongDecoder": "luong",
           "rnnsearch.models.transformer:TransformerDecoder": "transformer"}


def wiring(cfg: ModelConfig) -> str:
    """The :data:`WIRINGS` entry of the model's decoder; refused for a decoder without one."""
    decoder = cfg.architecture.decoder
    if decoder not in WIRINGS:
        raise ConfigError(f"model {cfg.model}: no FLOP count for its decoder {decoder} "
                          "(add its products to rnnsearch.bench.flops)")
    return WIRINGS[decoder]


@dataclass(frozen=True)
class Gemm:
    name: str
    m: int
    k: int
    n: int
    per_token: float

    @property
    def flops_per_token(self) -> float:
        """Forward FLOPs per target token."""
        return 2.0 * self.k * self.n * self.per_token


@dataclass(frozen=True)
class Shape:
    batch: int = 64          # sentences per batch
    src_len: float = 13.0    # mean source length (tokens)
    tgt_len: float = 14.0    # mean target length (tokens, with </s>)
    tgt_vocab: int = 8000


def encoder_terms(cfg: ModelConfig, shape: Shape) -> list[Gemm]:
    """The (bi)directional encoder: input and recurrent products per source token."""
    gates, hidden = GATES[cfg.cell] * cfg.hidden_size, cfg.hidden_size
    directions = 2 if cfg.bidirectional else 1
    ratio = shape.src_len / shape.tgt_len
    rows = round(shape.batch * shape.src_len)
    terms = []
    for layer in range(cfg.encoder_layers):
        width = cfg.embedding_size if layer == 0 else cfg.encoder_output_size
        terms.append(Gemm(f"enc{layer}.input", rows, width, gates, directions * ratio))
        terms.append(Gemm(f"enc{layer}.recurrent", shape.batch, hidden, gates, directions * ratio))
    return terms


def attention_terms(cfg: ModelConfig, shape: Shape) -> list[Gemm]:
    """Keys (once per source token), query, scores and context (per target token)."""
    if not cfg.architecture.attention:
        return []
    rows, ratio, src = round(shape.batch * shape.src_len), shape.src_len / shape.tgt_len, shape.src_len
    annotations, hidden = cfg.encoder_output_size, cfg.hidden_size
    terms = []
    if cfg.score in ("additive", "concat"):
        terms += [Gemm("att.keys", rows, annotations, cfg.attention_size, ratio),
                  Gemm("att.query", shape.batch, hidden, cfg.attention_size, 1.0),
                  Gemm("att.scores", rows, cfg.attention_size, 1, src)]
    else:
        if cfg.score == "general":
            terms.append(Gemm("att.keys", rows, annotations, hidden, ratio))
        terms.append(Gemm("att.scores", shape.batch, hidden, 1, src))
    terms.append(Gemm("att.context", shape.batch, 1, annotations, src))
    if wiring(cfg) == "luong":
        terms.append(Gemm("att.combine", shape.batch, annotations + hidden, hidden, 1.0))
    return terms


def decoder_terms(cfg: ModelConfig, shape: Shape) -> list[Gemm]:
    """Decoder recurrence, deep output (Bahdanau wiring) and the output layer."""
    gates, hidden = GATES[cfg.cell] * cfg.hidden_size, cfg.hidden_size
    rows = round(shape.batch * shape.tgt_len)
    luong = wiring(cfg) == "luong"
    if luong:
        extra = hidden if cfg.input_feeding else 0
        output_in = hidden
    else:   # the context: attention's (annotation wide), or the encoder's summary
        extra = cfg.encoder_output_size if cfg.architecture.attention else hidden
        output_in = cfg.output_size
    terms = [Gemm("dec.word_input", rows, cfg.embedding_size, gates, 1.0)]
    if extra:
        terms.append(Gemm("dec.context_input", shape.batch, extra, gates, 1.0))
    terms.append(Gemm("dec0.recurrent", shape.batch, hidden, gates, 1.0))
    if wiring(cfg) == "conditional":     # the transition's own recurrence (it reads the context)
        terms.append(Gemm("dec.transition_recurrent", shape.batch, hidden, gates, 1.0))
    for layer in range(1, cfg.decoder_layers):
        terms += [Gemm(f"dec{layer}.input", shape.batch, hidden, gates, 1.0),
                  Gemm(f"dec{layer}.recurrent", shape.batch, hidden, gates, 1.0)]
    if not luong:
        deep_in = hidden + cfg.embedding_size + extra
        terms.append(Gemm("dec.deep_output", rows, deep_in, cfg.output_size * (2 if cfg.maxout else 1), 1.0))
    terms.append(Gemm("dec.output", rows, output_in, shape.tgt_vocab, 1.0))
    return terms


def transformer_terms(cfg: ModelConfig, shape: Shape) -> list[Gemm]:
    """The Transformer's products: per layer the attention projections, its scores and mixes
    (every head together: ``d`` wide) and the feed-forward block; the output layer. Training
    runs the decoder's self-attention over every position, as the causal mask is applied."""
    d, inner = cfg.embedding_size, cfg.feedforward_size
    src_rows, tgt_rows = round(shape.batch * shape.src_len), round(shape.batch * shape.tgt_len)
    ratio, src, tgt = shape.src_len / shape.tgt_len, shape.src_len, shape.tgt_len

    def block(name: str, rows: int, per_token: float) -> list[Gemm]:
        return [Gemm(f"{name}.feed_forward_in", rows, d, inner, per_token),
                Gemm(f"{name}.feed_forward_out", rows, inner, d, per_token)]

    def attention(name: str, rows: int, keys: float, per_token: float) -> list[Gemm]:
        return [Gemm(f"{name}.scores", rows, d, 1, keys * per_token),
                Gemm(f"{name}.mix", rows, 1, d, keys * per_token)]

    terms = []
    for layer in range(cfg.encoder_layers):
        terms += [Gemm(f"enc{layer}.projections", src_rows, d, 4 * d, ratio),
                  *attention(f"enc{layer}.self", src_rows, src, ratio),
                  *block(f"enc{layer}", src_rows, ratio)]
    for layer in range(cfg.decoder_layers):
        terms += [Gemm(f"dec{layer}.projections", tgt_rows, d, 6 * d, 1.0),
                  Gemm(f"dec{layer}.source_keys", src_rows, d, 2 * d, ratio),
                  *attention(f"dec{layer}.self", tgt_rows, tgt, 1.0),
                  *attention(f"dec{layer}.cross", tgt_rows, src, 1.0),
                  *block(f"dec{layer}", tgt_rows, 1.0)]
    return terms + [Gemm("dec.output", tgt_rows, d, shape.tgt_vocab, 1.0)]


def model_gemms(cfg: ModelConfig, shape: Shape) -> list[Gemm]:
    """Every product of one training step, per target token."""
    if wiring(cfg) == "transformer":
        return transformer_terms(cfg, shape)
    return encoder_terms(cfg, shape) + attention_terms(cfg, shape) + decoder_terms(cfg, shape)


def training_flops_per_token(cfg: ModelConfig, shape: Shape) -> float:
    """Forward + backward FLOPs per target token."""
    return TRAIN_FACTOR * sum(g.flops_per_token for g in model_gemms(cfg, shape))
