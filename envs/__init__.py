"""Gymnasium environments of tensorgym (``import tensorgym.envs``)."""

from .base import TuningEnv, tuning_env
from .cutlass_env import CutlassEnv
from .landscape_env import LandscapeHopEnv
from .mapping_env import MappingEnv
from .microkernel_env import MicrokernelEnv
from .network_env import NetworkEnv, unwrap_network_env
from .registration import PARAMETRIC_IDS, env_ids, make_env, matching_env_ids, register_envs, workload_of
from .tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY, TileHopEnv

register_envs()

__all__ = ["FAILED_KERNEL_PENALTY", "INVALID_ACTION_PENALTY", "PARAMETRIC_IDS", "CutlassEnv", "LandscapeHopEnv",
           "MappingEnv", "MicrokernelEnv", "NetworkEnv", "TileHopEnv", "TuningEnv", "env_ids", "make_env",
           "matching_env_ids", "register_envs", "tuning_env", "unwrap_network_env", "workload_of"]
