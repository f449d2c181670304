"""Typed params: one frozen dataclass per params.yaml section, validated on load.

The loader lives in :mod:`rnnsearch.config.base`; each stage's dataclass lives in a module of
its own here (``prepare``, ``tokenize``, ...), next to nothing else.
"""
