"""DVC stage `train`: the body is rnnsearch.stages.train."""
from rnnsearch.stages.runner import main

main("train")
