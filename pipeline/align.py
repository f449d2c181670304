"""DVC stage `align`: the body is rnnsearch.stages.align."""
from rnnsearch.stages.runner import main

main("align")
