"""DVC stages `code` and `model_code`: the body is rnnsearch.stages.code."""
from _entry import run_stage

run_stage("code")
