"""rnnsearch: a reproducible experiment pipeline for recurrent neural machine translation.

Bahdanau, Cho & Bengio 2015 (RNNencdec vs RNNsearch) and Luong et al. 2015 (global/local
attention), from raw parallel text to the papers' tables, with DVC stages and MLflow runs."""

__version__ = "0.1.0"
