"""DVC stage `align_attention`: the body is rnnsearch.stages.align_attention."""
from _entry import run_stage

run_stage("align_attention")
