"""DVC stage `align_attention`: the body is rnnsearch.stages.align_attention."""
from rnnsearch.stages.runner import main

main("align_attention")
