"""DVC stage `prepare`: the body is rnnsearch.stages.prepare."""
from _entry import run_stage

run_stage("prepare")
