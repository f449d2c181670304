"""DVC stage `train_seed`: the body is rnnsearch.stages.train_seed."""
from _entry import run_stage

run_stage("train_seed")
