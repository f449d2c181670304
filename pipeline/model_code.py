"""DVC stage `model_code`: the body is rnnsearch.stages.model_code."""
from _entry import run_stage

run_stage("model_code")
