"""DVC stage `prepare`: the body is rnnsearch.stages.prepare."""
from rnnsearch.stages.runner import main

main("prepare")
