"""Standalone experiments: synthetic attention check, training-speed measurement."""
