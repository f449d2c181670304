"""Presets: named params overrides (``presets/<name>.yaml``) run as DVC experiments
(:mod:`rnnsearch.presets.cli`, ``python -m rnnsearch.presets``); a finished run's branch, export
and comparisons: :mod:`rnnsearch.runs`."""
