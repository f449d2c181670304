"""Finished runs kept apart from the workspace: where an experiment's results live (its git
branch and this clone's DVC cache: :mod:`~rnnsearch.runs.branches`, :mod:`~rnnsearch.runs.cache`),
their export to ``reports/presets/<name>/`` (:mod:`~rnnsearch.runs.export`), the comparison of
two runs (:mod:`~rnnsearch.runs.comparison`, run by the ``compare`` stage, and its list
:mod:`~rnnsearch.runs.registry`), one cell of a run (:mod:`~rnnsearch.runs.cells`) and the
experiments' table (:mod:`~rnnsearch.runs.exps`, ``make exps``)."""
