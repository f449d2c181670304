"""The DVC stages, one module each, named as in dvc.yaml and params.yaml.

Each module defines ``STAGE`` (a :class:`~rnnsearch.stages.runner.Stage`): its command-line
paths, its outputs and its body. :mod:`rnnsearch.stages.runner` does what every stage must do
the same way (params validation, one-line errors, atomic outputs, output locks, MLflow runs,
cleaning up after a killed run); ``pipeline/<stage>.py`` only calls it. Stages sit above the
library packages (data, config, models, training, lm, decoding, evaluation, reporting), which
never print, exit or open MLflow runs.
"""
