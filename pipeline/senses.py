"""DVC stage `senses`: the body is rnnsearch.stages.senses."""
from _entry import run_stage

run_stage("senses")
