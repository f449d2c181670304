"""DVC stage `senses`: the body is rnnsearch.stages.senses."""
from rnnsearch.stages.runner import main

main("senses")
