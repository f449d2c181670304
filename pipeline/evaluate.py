"""DVC stage `evaluate`: the body is rnnsearch.stages.evaluate."""
from _entry import run_stage

run_stage("evaluate")
