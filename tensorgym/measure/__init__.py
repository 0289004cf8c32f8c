"""Compiling and timing kernels: builder pool, Runner (local process, or remote), one timing protocol."""

from .contention import ContentionProbe
from .measurer import Measurer
from .protocol import Timing, TimingProtocol
from .runner import LocalRunner, Runner

__all__ = ["ContentionProbe", "LocalRunner", "Measurer", "Runner", "Timing", "TimingProtocol"]
