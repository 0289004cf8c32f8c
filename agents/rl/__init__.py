"""Reinforcement learning on tensorgym envs with stable-baselines3: training, policy files, the ``rl`` agent.

Imports stable-baselines3 (and torch) only when a function that needs them runs.
"""

from .agent import RLAgent
from .layers import LayerSampledEnv, layer_env_factory
from .policy import ALGORITHMS, PolicyInfo, PolicyMismatch, load_policy, read_info
from .train import make_model, make_training_env, train

__all__ = ["ALGORITHMS", "LayerSampledEnv", "PolicyInfo", "PolicyMismatch", "RLAgent", "layer_env_factory",
           "load_policy", "make_model", "make_training_env", "read_info", "train"]
