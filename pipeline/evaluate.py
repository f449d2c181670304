"""DVC stage `evaluate`: the body is rnnsearch.stages.evaluate."""
from rnnsearch.stages.runner import main

main("evaluate")
