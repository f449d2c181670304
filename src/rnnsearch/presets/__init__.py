"""Presets: named params overrides (``presets/<name>.yaml``) run as DVC experiments
(:mod:`rnnsearch.presets.cli`, ``python -m rnnsearch.presets``): their definition, their git
branches, the export of their reports and the comparison stages."""
