"""tensorgym: tensor-kernel tuning as Gymnasium environments, rewarded by compiled and timed TVM kernels.

``import tensorgym`` registers every environment id (``Conv2d-ResNet-R5-v0``,
``Matmul-BERT-M3-v0``, ``tensorgym/Conv2d-v0``, ``Network-ResNet18-v0`` ...) with Gymnasium.
"""

from importlib import metadata as _metadata

from . import workloads
from .config import Config, ConfigError
from .context import TuningContext
from .database import Database
from .errors import TensorgymError
from .networks import NETWORKS, Network, network
from .record import Record, Status
from .measure.rpc import remote_target
from .target import cuda_target, local_cpu
from .workloads import conv2d, matmul

from . import envs  # noqa: E402  (registers the environments)
from .envs import make_env  # noqa: E402

try:
    __version__ = _metadata.version("tensorgym")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["NETWORKS", "Config", "ConfigError", "Database", "Network", "Record", "Status", "TensorgymError",
           "TuningContext", "conv2d", "cuda_target", "envs", "local_cpu", "make_env", "matmul", "network",
           "remote_target", "workloads"]
