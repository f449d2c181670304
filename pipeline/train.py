"""DVC stage `train`: the body is rnnsearch.stages.train."""
from _entry import run_stage

run_stage("train")
