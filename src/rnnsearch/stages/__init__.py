"""The DVC stages, one module each, named as in dvc.yaml and params.yaml.

Each defines ``STAGE`` (a :class:`~rnnsearch.stages.runner.Stage`), run by
:mod:`rnnsearch.stages.runner`. Stages sit above the library packages, which never print, exit
or open MLflow runs."""
