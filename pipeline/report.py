"""DVC stage `report`: the body is rnnsearch.stages.report."""
from _entry import run_stage

run_stage("report")
