"""tensorgym: tensor-kernel tuning as Gymnasium environments, rewarded by compiled and timed TVM kernels.

``import tensorgym`` registers every environment id (``Conv2d-ResNet-R5-v0``,
``Matmul-BERT-M3-v0``, ``tensorgym/Conv2d-v0`` ...) with Gymnasium.
"""

from . import workloads
from .database import Database
from .record import Record, Status
from .spaces import Config
from .target import local_cpu
from .workloads import conv2d, matmul

from . import envs  # noqa: E402  (registers the environments)
from .envs import make_env  # noqa: E402

__version__ = "0.1.0"

__all__ = ["Config", "Database", "Record", "Status", "conv2d", "envs", "local_cpu", "make_env", "matmul",
           "workloads"]
