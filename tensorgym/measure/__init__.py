"""Compiling and timing kernels: builder pool, Runner (local process, or remote), one timing protocol."""

from .measurer import Measurer
from .protocol import TimingProtocol
from .runner import CudaRunner, LocalRunner, Runner

__all__ = ["CudaRunner", "LocalRunner", "Measurer", "Runner", "TimingProtocol"]
