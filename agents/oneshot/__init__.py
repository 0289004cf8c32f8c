"""Seed 004 (One-Shot Tuner): a predictor pre-trained on a dataset, searched once, validated with k measurements.

Imports torch only when a predictor is built, trained or loaded.
"""

from .agent import OneShotAgent
from .features import BatchFeaturizer, feature_names
from .model import OneShotPredictor, TargetMismatch, load_predictor
from .train import measurements_from_database, measurements_from_landscapes, train_predictor

__all__ = ["BatchFeaturizer", "OneShotAgent", "OneShotPredictor", "TargetMismatch", "feature_names",
           "load_predictor", "measurements_from_database", "measurements_from_landscapes", "train_predictor"]
