"""Finished runs kept apart from the workspace: their git branch and DVC cache
(:mod:`~rnnsearch.runs.branches`, :mod:`~rnnsearch.runs.cache`), export to
``reports/presets/<name>/`` (:mod:`~rnnsearch.runs.export`), two runs compared by the ``compare``
stage (:mod:`~rnnsearch.runs.comparison`, listed by :mod:`~rnnsearch.runs.registry`), one cell
(:mod:`~rnnsearch.runs.cells`) and the experiments' table (:mod:`~rnnsearch.runs.exps`)."""
