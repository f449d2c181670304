"""Finished runs kept apart from the workspace: an experiment's git branch and DVC cache
(:mod:`~rnnsearch.runs.branches`, :mod:`~rnnsearch.runs.cache`) and the comparison of two runs
(:mod:`~rnnsearch.runs.comparison`), which the ``compare`` stage and the presets tool share."""
