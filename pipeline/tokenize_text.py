"""DVC stage `tokenize`: the body is rnnsearch.stages.tokenize.
Named tokenize_text.py so that it does not shadow Python's own tokenize module."""
from _entry import run_stage

run_stage("tokenize")
