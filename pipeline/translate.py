"""DVC stage `translate`: the body is rnnsearch.stages.translate."""
from _entry import run_stage

run_stage("translate")
