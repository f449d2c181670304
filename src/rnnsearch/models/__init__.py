"""Translation models: one encoder, one recurrent decoder core, pluggable attention.

The interface decoding relies on (``docs/contracts.md``)::

    memory = model.encode(src, src_len)          # Memory
    state = model.init_state(memory)             # DecoderState
    logits, state, attn = model.step(prev, state, memory)
    logits, attn = model(src, src_len, tgt_in)   # teacher forcing
"""
