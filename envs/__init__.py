"""Gymnasium environments of tensorgym (``import tensorgym.envs``)."""

from .base import TuningEnv, default_db_path
from .microkernel_env import MicrokernelEnv
from .registration import ENV_CLASSES, PARAMETRIC_IDS, make_env, parse_shape, register_envs, shape_kwargs
from .tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY, TileHopEnv

register_envs()

__all__ = ["ENV_CLASSES", "FAILED_KERNEL_PENALTY", "INVALID_ACTION_PENALTY", "PARAMETRIC_IDS", "MicrokernelEnv",
           "TileHopEnv", "TuningEnv", "default_db_path", "make_env", "parse_shape", "register_envs", "shape_kwargs"]
