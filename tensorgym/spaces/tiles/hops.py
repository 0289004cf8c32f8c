"""The 1-hop moves between a fixed set of recorded configs of one ``tiles`` space.

A replay (offline) environment can only move between configs the database
holds. :class:`HopGraph` precomputes, for every recorded config, where each
hop action lands among the recorded configs, so that stepping, masking and
choosing start states cost an array lookup instead of a hop computation and a
database query per action.

Actions follow the tile-hop convention: action ``2 * i`` moves coordinate
``i`` up its sorted choice list, ``2 * i + 1`` down. A hop is reversible (the
derived outermost level makes up the difference both ways), so a config
reached by a move always has the move back.

A *dead end* is a config from which no action reaches a recorded config that
ran correctly: whatever the agent does there, the state cannot change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...record import Record
from .space import TilesSpace


class HopGraph:
    """Recorded configs of one space and the hop actions between them.

    Attributes:
        records: the recorded configs' records (node ``i`` is ``records[i]``).
        table: ``table[i, a]`` is the node action ``a`` leads to from node ``i``, or -1 when the
            hop leaves the space or lands on a config the records do not hold.
        ok: whether each node's kernel ran correctly.
        gflops: each node's GFLOP/s (0 for failed kernels).
        movable: nodes that ran correctly and have at least one action to a correct node (not dead ends).
    """

    def __init__(self, space: TilesSpace, records: Sequence[Record]):
        self.space = space
        self.records: list[Record] = list(records)
        self.index: dict = {r.config: i for i, r in enumerate(self.records)}
        n_actions = 2 * len(space.coordinates)
        self.table = np.full((len(self.records), n_actions), -1, dtype=np.int64)
        for i, record in enumerate(self.records):
            for coordinate in range(len(space.coordinates)):
                for column, direction in ((2 * coordinate, 1), (2 * coordinate + 1, -1)):
                    target = space.hop(record.config, coordinate, direction)
                    if target is not None:
                        self.table[i, column] = self.index.get(target, -1)
        self.ok = np.array([r.ok for r in self.records], dtype=bool)
        self.gflops = np.array([r.score for r in self.records], dtype=np.float64)
        if len(self.records):
            lands_ok = (self.table >= 0) & self.ok[np.maximum(self.table, 0)]
            self.movable = self.ok & lands_ok.any(axis=1)
        else:
            self.movable = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def starts(self) -> np.ndarray:
        """Indices of the nodes an episode may start from (correct kernels that are not dead ends)."""
        return np.flatnonzero(self.movable)

    def node(self, config) -> int | None:
        """The node of ``config``, or None if it is not recorded."""
        return self.index.get(config)
