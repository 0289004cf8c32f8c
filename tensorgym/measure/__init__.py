"""Compiling and timing kernels: builder pool, Runner (local process, or remote), one timing protocol."""

from .measurer import Measurer
from .protocol import TimingProtocol
from .rpc import DeviceUnavailable, RPCRunner, remote_target
from .runner import LocalRunner, Runner

__all__ = ["DeviceUnavailable", "LocalRunner", "Measurer", "RPCRunner", "Runner", "TimingProtocol", "remote_target"]
