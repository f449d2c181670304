"""Translation models: one encoder, one recurrent decoder core, pluggable attention.

The interface decoding relies on (``docs/contracts.md``)::

    memory = model.encode(src, src_len)          # Memory
    state = model.init_state(memory)             # DecoderState
    logits, state, attn = model.step(prev, state, memory)
    logits, attn = model(src, src_len, tgt_in)   # teacher forcing
"""
from rnnsearch.config.model import ModelConfig
from rnnsearch.models.attention import Attention
from rnnsearch.models.seq2seq import (Seq2Seq, build_model, count_parameters, load_model,
                                      save_model)
from rnnsearch.models.state import DecoderState, Memory, reorder

__all__ = ["Attention", "DecoderState", "Memory", "ModelConfig", "Seq2Seq", "build_model",
           "count_parameters", "load_model", "reorder", "save_model"]
