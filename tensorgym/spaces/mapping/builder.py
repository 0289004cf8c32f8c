"""How the ``mapping`` space's configs become kernels: the tensorized computation of the config's candidate.

:class:`MappingBuilder` schedules a config of a :class:`~.space.MappingSpace` with
:func:`.kernels.build_module` (the intrinsic's TIR, the tiles around it), gives the
runner the arguments its kernels take (the weights packed by :func:`.packing.pack_weights`
outside the timed call when the space is ``prepacked``), and asks the OS for AMX tile
state in the process that runs a space with AMX candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...config import Config
from ..builder import KernelBuilder
from .packing import pack_weights


class MappingBuilder(KernelBuilder):
    """Builds the tensorized kernels of a :class:`~.space.MappingSpace`'s configs (see the module docs)."""

    def apply(self, config: Config):
        from .kernels import build_module

        space = self.space
        space.check(config)
        return build_module(space.nest(config), config, space.prepacked)

    def prepare_runtime(self) -> None:
        space = self.space
        if any(space.nests[i].tile for i in space.choices):
            from .tir import request_amx

            request_amx()

    def kernel_arguments(self, config: Config, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        space = self.space
        if not space.prepacked:
            return super().kernel_arguments(config, inputs)
        data, weights = inputs
        return [data, pack_weights(space.nest(config), weights),
                np.zeros(self.workload.output_shape, dtype=self.workload.output_dtype)]
