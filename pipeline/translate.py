"""DVC stage `translate`: the body is rnnsearch.stages.translate."""
from rnnsearch.stages.runner import main

main("translate")
