"""How a registry entry names its code: ``"module:attribute"``, loaded when it is used.

The registries (:data:`rnnsearch.config.methods.DECODING_METHODS`,
:data:`rnnsearch.config.architectures.ARCHITECTURES`) sit in config, below the packages that hold their
code, so that validating params never imports torch; the library module that uses an entry
loads its code with :func:`load`. ``tests/import_graph.py`` counts a module named by an entry as
imported by each module that imports both its registry and :func:`load`, so the layout checks and
each DVC stage's deps see it as they see a written import.
"""
from __future__ import annotations

import importlib
from typing import Any


def load(reference: str) -> Any:
    """The attribute ``reference`` (``"package.module:attribute"``) names."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)
