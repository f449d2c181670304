"""DVC stage `embed`: the body is rnnsearch.stages.embed."""
from _entry import run_stage

run_stage("embed")
