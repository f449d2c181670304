"""The decoding methods: the one list of them, each with its search function.

``translate.methods``, ``report.method`` and the ``--method`` options are checked against it;
:func:`rnnsearch.decoding.corpus.translate_corpus` calls an entry's function. A new method is an
entry here plus its module (docs/contributing.md)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecodingMethod:
    """One decoding method."""

    # "module:function", called as function(model, src, src_len, options) -> list[Translation]
    # (rnnsearch.decoding.corpus.Decoder)
    function: str
    # True: keeps one hypothesis per sentence, so it searches with beam_size 1 and nbest 1
    # whatever translate.search says (rnnsearch.config.translate.method_options)
    one_hypothesis: bool = False


DECODING_METHODS: dict[str, DecodingMethod] = {
    "greedy": DecodingMethod("rnnsearch.decoding.greedy:greedy", one_hypothesis=True),
    "beam": DecodingMethod("rnnsearch.decoding.beam:beam_search"),
}
UNK_SUFFIX = "_unk"     # a method's output after UNK replacement: system <method>_unk


def method_names() -> tuple[str, ...]:
    """The methods' names, in registry order."""
    return tuple(DECODING_METHODS)


def system_names() -> tuple[str, ...]:
    """The systems the translate stage can write: each method, then each with UNK replacement."""
    return (*DECODING_METHODS, *(f"{name}{UNK_SUFFIX}" for name in DECODING_METHODS))
