"""Standalone experiments (``python -m rnnsearch.experiments.<name>``), e.g. the synthetic attention
check; training and decoding speed: ``python -m rnnsearch.bench`` (``make bench``)."""
