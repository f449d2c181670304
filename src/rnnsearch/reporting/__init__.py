"""Reporting: the papers' tables (Markdown, LaTeX) and figures (PNG) from metrics files only."""
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.write import RESULTS, write_report

__all__ = ["RESULTS", "ReportInputs", "write_report"]
