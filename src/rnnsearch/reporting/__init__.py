"""Reporting: the papers' tables (Markdown, LaTeX) and figures (PNG) from metrics files only."""
