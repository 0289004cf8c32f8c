"""Seed 004 (One-Shot Tuner): a predictor pre-trained on a dataset, searched once, validated with k measurements."""
