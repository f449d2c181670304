"""Luong et al. 2015's UNK replacement without their learnt dictionary: each output ``<unk>``
becomes the source word it attended to most (copying already repairs names and numbers)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rnnsearch.data.vocab import UNK


def replace_unknowns(words: Sequence[str], src_words: Sequence[str],
                     attention: np.ndarray | None) -> list[str]:
    """``words``, each ``<unk>`` replaced by its most-attended source word. ``attention``: >=
    ``len(words)`` rows x source positions (``src_words`` first; a position past them, e.g. a source
    ``</s>``, keeps the ``<unk>``); None: no change."""
    if attention is None:
        return list(words)
    out = []
    for position, word in enumerate(words):
        if word == UNK:
            source = int(np.argmax(attention[position]))
            word = src_words[source] if source < len(src_words) else word
        out.append(word)
    return out
