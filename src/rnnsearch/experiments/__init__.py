"""Standalone experiments: the synthetic attention check (``python -m rnnsearch.experiments.synthetic``).

Training and decoding speed are measured by ``python -m rnnsearch.bench`` (``make bench``)."""
