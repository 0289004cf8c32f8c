"""Compiling and timing kernels: builder pool, Runner (local process, or remote), one timing protocol."""

from .measurer import Measurer
from .protocol import TimingProtocol
from .runner import LocalRunner, Runner

__all__ = ["LocalRunner", "Measurer", "Runner", "TimingProtocol"]
