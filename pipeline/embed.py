"""DVC stage `embed`: the body is rnnsearch.stages.embed."""
from rnnsearch.stages.runner import main

main("embed")
