"""DVC stage `align`: the body is rnnsearch.stages.align."""
from _entry import run_stage

run_stage("align")
