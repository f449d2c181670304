"""Decoding: greedy and batched beam search over the model interface of docs/contracts.md.

``encode / init_state / step`` are all a decoder needs, so every model of the grid (with or
without attention) decodes through the same code. Entry points:
:func:`rnnsearch.decoding.greedy.greedy`, :func:`rnnsearch.decoding.beam.beam_search`,
:func:`rnnsearch.decoding.corpus.translate_corpus`; ``python -m rnnsearch.decoding.cli``
translates your own sentences. Like every package ``__init__`` of the project, this one imports
nothing, so that a stage depends on the modules it uses only (tests/test_dvc_deps.py).
"""
