"""Mapping environment: choose how a workload's loops map onto a hardware intrinsic, and tile the rest (seed 002).

``gym.make("Conv2d-ResNet18-C4-v0", space="mapping", dtype="int8")`` walks the
:class:`~tensorgym.spaces.mapping.MappingSpace` of the layer: every state is a
config (a mapping candidate: an intrinsic such as AMX ``tdpbusd``, AVX-512
VNNI ``vpdpbusd`` or, on an AVX2 CPU, ``vpmaddwd`` and the loops fused onto its
axes; the tiles of the loops left outside it), and every step compiles the tensorized kernel, checks it
against NumPy (exactly, for int8), times it and stores the record.

**Actions.** ``Discrete(K + 2 * m)``: action ``k < K`` switches to mapping
candidate ``k`` of :attr:`MappingSpace.candidates` (the tiles carried over loop
by loop); action ``K + 2 * i`` moves tile coordinate ``i`` of
:attr:`MappingSpace.coordinates` to its next larger value, ``K + 2 * i + 1`` to
the next smaller. ``info["action_mask"]`` and :meth:`action_masks` mark the
moves that stay in the space: switches to the current candidate or to masked or
pruned ones (``tensorgym mapping ENV`` lists them with their rule), and hops of
coordinates the current candidate does not have (its residual loops differ),
are masked.

**Reward, observation, episodes.** As in :class:`~tensorgym.envs.TileHopEnv`:
``log2`` of the measured speed ratio for an accepted move, -1 for a masked
action or a failing kernel (the state stays); the observation is the config's
encoding (the candidate one-hot, then the tile coordinates), the normalised
features of :mod:`tensorgym.spaces.mapping.features` (the candidate's resource
estimate among them: utilisation, duplication, packed sizes, operand panel vs
L2) and the current and best throughputs on a log scale. ``info`` also carries
``candidate`` (its label), ``packing`` and ``unit`` (GOP/s for int8, GFLOP/s
otherwise; ``gflops`` holds the value).

Keyword arguments other than the env's go to the space (``prepacked``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError
from tensorgym.record import Record
from tensorgym.spaces.mapping import MappingSpace
from tensorgym.workloads import Workload

from .tile_hop import TileHopEnv


class MappingEnv(TileHopEnv):
    """Switch mapping candidates and hop tiles; rewards are measured speed-ups (see the module docs)."""

    space_name = "mapping"
    search_space: MappingSpace
    graph_replay = False  # the hop graph knows tile hops, not candidate switches: replay looks records up

    def __init__(self, workload: Workload, **kwargs: Any):
        if kwargs.get("observation", "layer") != "layer":
            raise InvalidArgumentError("the mapping env observes one layer (observation='layer'); the common "
                                       "observation layout is the tile-hop env's")
        super().__init__(workload, **kwargs)
        space = self.search_space
        self.n_candidates = len(space.candidates)
        self.action_space = spaces.Discrete(self.n_candidates + 2 * len(space.coordinates))

    def _move(self, action: int) -> Config | None:
        space = self.search_space
        if action < self.n_candidates:
            return space.switch(self._config, action)
        coordinate, down = divmod(action - self.n_candidates, 2)
        return space.hop(self._config, coordinate, -1 if down else 1)

    def _legal_moves(self) -> np.ndarray:
        space = self.search_space
        switches = np.zeros(self.n_candidates, dtype=bool)
        current = space.candidate_of(self._config)
        for index in space.choices:
            switches[index] = index != current
        return np.concatenate([switches, space.hop_mask(self._config)])

    def _info(self, tried: Record | None, status: str) -> dict[str, Any]:
        info = super()._info(tried, status)
        space = self.search_space
        extra = space.info(self._config)
        info.update(candidate=extra["mapping"], packing=extra["packing"])
        return info
