"""DVC stage `pretrain_lm`: the body is rnnsearch.stages.pretrain_lm."""
from rnnsearch.stages.runner import main

main("pretrain_lm")
