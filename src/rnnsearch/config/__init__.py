"""Typed params: one frozen dataclass per params.yaml section, validated on load
(:mod:`rnnsearch.config.base`); each section's dataclass has a module of its own here."""
