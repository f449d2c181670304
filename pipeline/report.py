"""DVC stage `report`: the body is rnnsearch.stages.report."""
from rnnsearch.stages.runner import main

main("report")
