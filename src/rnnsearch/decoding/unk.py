"""Luong et al. 2015's UNK replacement, dictionary-free: each output ``<unk>`` becomes the source
word it attended to most (Luong et al. translate it with a learnt dictionary; copying already
repairs names and numbers)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rnnsearch.data.vocab import UNK


def replace_unknowns(words: Sequence[str], src_words: Sequence[str],
                     attention: np.ndarray | None) -> list[str]:
    """``words`` with every ``<unk>`` replaced by its most-attended source word.
    ``attention``: at least ``len(words)`` rows x source positions (``src_words`` first; a position
    past them, such as a source ``</s>``, leaves the ``<unk>`` as it is). Without attention the
    words come back unchanged."""
    if attention is None:
        return list(words)
    out = []
    for position, word in enumerate(words):
        if word == UNK:
            source = int(np.argmax(attention[position]))
            word = src_words[source] if source < len(src_words) else word
        out.append(word)
    return out
