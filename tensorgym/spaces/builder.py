"""What turns a space's configs into kernels: the :class:`KernelBuilder` interface.

A :class:`~tensorgym.spaces.base.Space` is the search geometry agents see (sample,
neighbours, hops, encode, features). Building and running its kernels is a
separate job, MetaSchedule's split between a design space and its builder and
runner: :meth:`Space.builder() <tensorgym.spaces.base.Space.builder>` gives the
space's builder, and that is all :mod:`tensorgym.measure` receives. The builder
schedules a config into a TVM ``IRModule`` (:meth:`KernelBuilder.apply`) or, for
kernels TVM does not write, a CUDA source (:meth:`KernelBuilder.cuda_kernel`), and
tells the runner how to call the kernel: its arguments, the process set-up it
needs, and how to read its output back into the workload's layout.

Builders are pickled into the measurer's build and run processes. Each holds the
space it builds for (the geometry decides the loop nest), so it pickles as small as
the space does and is rebuilt the same way on the other side.

This module imports nothing of the spaces: every space module may import it, and
the measurer needs nothing else of the spaces' package.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np


class KernelBuilder(ABC):
    """Builds and prepares the kernels of one space's configs (see the module docs).

    Subclasses implement :meth:`apply` (or :meth:`cuda_kernel` for CUDA runners) and override the
    runtime hooks when their kernels take other layouts than the workload's.
    """

    def __init__(self, space: Any):
        self.space = space

    # What the measurer and the runners read of the problem: the workload, the target, the check's tolerance.
    @property
    def workload(self):
        return self.space.workload

    @property
    def target(self):
        return self.space.target

    @property
    def tensor_cores(self) -> bool:
        """Whether the kernels accumulate on tensor cores (their check uses the protocol's rtol)."""
        return bool(getattr(self.space, "tensor_cores", False))

    # -- building (the builder pool) ---------------------------------------------------------------
    @abstractmethod
    def apply(self, config):
        """The scheduled ``tvm.IRModule`` of ``config`` (needs TVM; runs in build workers)."""

    def cuda_kernel(self, config):
        """The :class:`~tensorgym.cuda.kernel.CudaKernel` of ``config`` (source and launch), for the CUDA runner."""
        raise NotImplementedError(f"the {self.space.name!r} space builds TVM modules for "
                                  f"{self.target.label}, not CUDA kernels")

    # -- running (the runner's process, outside the timed region) -----------------------------------------
    def kernel_arguments(self, config, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The arrays the compiled kernel takes: inputs then an output buffer.

        Builders whose kernels expect pre-packed layouts override this and :meth:`canonical_output`;
        the runner calls them outside the timed region.
        """
        self.space.check(config)
        wl = self.workload
        return [*inputs, np.zeros(wl.output_shape, dtype=wl.output_dtype)]

    def prepare_runtime(self) -> None:  # noqa: B027 - most kernels need nothing
        """Prepare the process that runs these kernels (e.g. ask the OS for AMX tile state).

        Runners call it before every kernel, in the process that runs it; it must be cheap when
        already done.
        """

    def canonical_output(self, config, arguments: Sequence[np.ndarray]) -> np.ndarray:
        """The workload's output, in its canonical layout, from the kernel's arguments."""
        return arguments[-1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.space!r})"
