"""Presets: named params overrides (``presets/<name>.yaml``) run as DVC experiments
(:mod:`rnnsearch.presets.cli`, ``python -m rnnsearch.presets``): their definition and the chain
that runs them; what a finished run becomes (its branch, export, comparisons) is
:mod:`rnnsearch.runs`."""
