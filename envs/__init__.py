"""Gymnasium environments of tensorgym (``import tensorgym.envs``)."""

from .base import TuningEnv, tuning_env
from .cutlass_env import CutlassEnv
from .microkernel_env import MicrokernelEnv
from .registration import PARAMETRIC_IDS, env_ids, make_env, register_envs, workload_of
from .tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY, TileHopEnv

register_envs()

__all__ = ["FAILED_KERNEL_PENALTY", "INVALID_ACTION_PENALTY", "PARAMETRIC_IDS", "CutlassEnv", "MicrokernelEnv",
           "TileHopEnv", "TuningEnv", "env_ids", "make_env", "register_envs", "tuning_env", "workload_of"]
