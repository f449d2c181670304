"""The architectures (:data:`ARCHITECTURES`): a model's ``model`` param names an entry, whose
``"module:Class"`` encoder and decoder :class:`rnnsearch.models.seq2seq.Seq2Seq` builds. Its own
module so that each model's cells depend on its entry only (:mod:`rnnsearch.stages.model_code`):
a new architecture reruns none."""
from __future__ import annotations

from dataclasses import dataclass

SCORES = ("additive", "concat", "dot", "general", "scaled_dot")
ATTENTIONS = ("global", "local_m", "local_p")


@dataclass(frozen=True)
class Architecture:
    """How a model is wired: the classes Seq2Seq builds and the attention settings it accepts."""

    # "module:Class" of the decoder, built as Class(tgt_vocab, config) (rnnsearch.models.decoder)
    decoder: str
    attention: bool = True                  # attends to the source (False: score etc. unused)
    # the attention scores it accepts (none: its own, and score and attention are not read)
    scores: tuple[str, ...] = SCORES
    attentions: tuple[str, ...] = ATTENTIONS  # ... and the attentions (global, local)
    # "module:Class" of the encoder, built as Class(src_vocab, config)
    encoder: str = "rnnsearch.models.encoder:Encoder"
    recurrent: bool = True                  # RNN encoder and decoder (orthogonal init, init.lm)
    # ModelConfig fields only this architecture reads: checked, and saved, for its models only
    settings: tuple[str, ...] = ()


TRANSFORMER_SETTINGS = ("heads", "feedforward_size", "alignment_layer")


ARCHITECTURES: dict[str, Architecture] = {
    "encdec": Architecture("rnnsearch.models.decoder:BahdanauDecoder", attention=False),
    "search": Architecture("rnnsearch.models.decoder:BahdanauDecoder",
                           scores=("additive", "concat"), attentions=("global",)),
    "search_cond": Architecture("rnnsearch.models.decoder:ConditionalDecoder",
                                scores=("additive", "concat"), attentions=("global",)),
    "luong": Architecture("rnnsearch.models.decoder:LuongDecoder"),
    "transformer": Architecture("rnnsearch.models.transformer:TransformerDecoder", scores=(),
                                attentions=(), recurrent=False, settings=TRANSFORMER_SETTINGS,
                                encoder="rnnsearch.models.transformer:TransformerEncoder"),
}
