"""The DVC stages, one module each, named as in dvc.yaml and params.yaml; each defines ``STAGE``
(a :class:`~rnnsearch.stages.runner.Stage`). Stages sit above the library packages, which never
print, exit or open MLflow runs."""
