"""Decoding: greedy and batched beam search over the model interface of docs/contracts.md.

``encode / init_state / step`` are all a decoder needs, so every model of the grid (with or
without attention) decodes through the same code. Entry points: :func:`greedy`,
:func:`beam_search`, :func:`translate_corpus`; ``python -m rnnsearch.decoding.cli`` translates
your own sentences.
"""
from rnnsearch.decoding.beam import beam_search
from rnnsearch.decoding.corpus import CorpusResult, encode_source, pad_batch, translate_corpus
from rnnsearch.decoding.greedy import greedy
from rnnsearch.decoding.hypothesis import Hypothesis, Translation
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise
from rnnsearch.decoding.unk import replace_unknowns

__all__ = ["CorpusResult", "Hypothesis", "SearchOptions", "Translation", "beam_search",
           "encode_source", "greedy", "max_output_lengths", "normalise", "pad_batch",
           "replace_unknowns", "translate_corpus"]
