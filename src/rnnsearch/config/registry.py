"""How a registry entry names its code: ``"module:attribute"``, loaded when it is used.

The registries sit in config, below the code they name, so validating params never imports
torch; their users call :func:`load`. ``tests/import_graph.py`` counts an entry's module as
imported by each module importing both its registry and :func:`load` (layout checks, DVC deps)."""
from __future__ import annotations

import importlib
from typing import Any


def load(reference: str) -> Any:
    """The attribute ``reference`` (``"package.module:attribute"``) names."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)
