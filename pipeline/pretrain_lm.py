"""DVC stage `pretrain_lm`: the body is rnnsearch.stages.pretrain_lm."""
from _entry import run_stage

run_stage("pretrain_lm")
