"""Compiling and timing kernels: builder pool, Runner (local process, or remote), one timing protocol."""

from .contention import ContentionProbe
from .measurer import Measurer
from .protocol import Timing, TimingProtocol
from .rpc import DeviceUnavailable, RPCRunner, remote_target
from .runner import CudaRunner, LocalRunner, Runner

__all__ = ["ContentionProbe", "CudaRunner", "DeviceUnavailable", "LocalRunner", "Measurer", "RPCRunner", "Runner",
           "Timing", "TimingProtocol", "remote_target"]
