"""DVC stage `search_error`: the body is rnnsearch.stages.search_error."""
from _entry import run_stage

run_stage("search_error")
