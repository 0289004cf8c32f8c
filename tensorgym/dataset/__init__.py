"""Measurement datasets (seed 004): which layers to measure, how to explore them, and export to pandas."""
