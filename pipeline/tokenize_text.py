"""DVC stage `tokenize`: the body is rnnsearch.stages.tokenize.
Named tokenize_text.py so that it does not shadow Python's own tokenize module."""
from rnnsearch.stages.runner import main

main("tokenize")
