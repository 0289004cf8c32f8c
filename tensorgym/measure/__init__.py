"""Compiling and timing kernels: builder pool, isolated runner, one timing protocol."""

from .measurer import Measurer
from .protocol import TimingProtocol

__all__ = ["Measurer", "TimingProtocol"]
