"""DVC stage `compare` (reports/presets/dvc.yaml): the body is rnnsearch.stages.compare."""
from _entry import run_stage

run_stage("compare")
