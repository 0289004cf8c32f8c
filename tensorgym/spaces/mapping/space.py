"""The ``mapping`` space (seed 002, GTA): which intrinsic, which mapping of the loops onto it, which tiles.

A config is

* ``candidate``: the index of a mapping candidate in :attr:`MappingSpace.candidates`: an
  intrinsic of the workload's dtype (:mod:`.intrinsics`: AMX, VNNI and AVX2 ``vpmaddwd`` for
  int8, AMX, AVX512-BF16 and the AVX2 FMA on widened bf16 for bf16, the 512- and 256-bit FMA
  for float32) and one of its mappings
  (:mod:`.enumeration`: conv2d onto a dot product: ``r`` <- any non-empty subset of
  ``{rc, ry, rx}``, 7 candidates; onto an AMX tile: GTA's 35; a matmul: 1 per intrinsic);
* the multi-level tiles of the loops the intrinsic leaves outside (:mod:`.nest`), with
  the ``tiles`` space's knobs and rules (:class:`~tensorgym.spaces.tiles.tiling.LoopTiling`:
  4 levels per spatial loop, 2 per reduction, ``unroll``, ``cache_write``; here
  ``cache_write`` places the write-back of the accumulators: at ``S1``, or once per parallel task);
* ``prepacked``: fixed by the space. By default the kernel packs the weights and the
  activations itself, inside the timed call; with ``prepacked=True`` it takes the weights
  already packed (packed outside the timed region, as a network packs its constant
  weights once) and still packs the activations. ``info(config)["packing"]`` says which.

A config looks like ``{"candidate": 3, "n": [1, 1, 1, 1], "f": [2, 2, 1, 2], "y": [7, 2, 1, 2],
"x": [14, 1, 2, 1], "ry": [3, 1], "rx": [1, 3], "r": [16, 2], "unroll": 16, "cache_write": 1,
"prepacked": 0}`` (``f`` and ``r`` count blocks of the intrinsic's lanes and depth).

Candidates the target cannot run or that waste the intrinsic are masked or pruned with
their rule (:mod:`.pruning`); the others are *kept*. ``sample`` draws a kept candidate
uniformly, then its tiles as the ``tiles`` space does, then shrinks the register block
until it fits the register file (a tile config must pass :func:`.pruning.register_block_fits`).

Moves (``neighbours``, the env's actions): a hop of one tile coordinate of the current
candidate, as in the ``tiles`` space, or a switch to another kept candidate (one hop), whose
tiles are carried over loop by loop (:func:`~tensorgym.spaces.tiles.tiling.project_tiles`).
``neighbours(config, hops)`` for ``hops > 1`` moves ``hops`` tile coordinates of the same
candidate.

Task schedulers (seed 002's dual-task scheduling) give measurements to candidates
separately: :meth:`MappingSpace.restricted` is the space of one candidate's configs (same
name, so the records are shared).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cached_property, lru_cache
from math import prod
from typing import Any

import numpy as np

from ...config import Config
from ...record import Record
from ...target import Target
from ...workloads import Conv2d, Matmul, Workload
from ..base import Space, SpaceError
from ..tiles.tiling import UNROLL_CHOICES, Coordinate, LoopTiling, project_tiles
from .enumeration import candidates as enumerate_candidates
from .enumeration import intrinsic_computation, operator_of
from .builder import MappingBuilder
from .features import FEATURE_NAMES, generic_feature_names, generic_features, mapping_features, normalise, scaled
from .intrinsics import intrinsics_for
from .nest import Candidate, MappedNest
from .pruning import Verdict, judge, register_block_fits

MAX_REPAIRS = 64  # enough: each repair halves (at least) one loop's register tile


@lru_cache(maxsize=64)
def candidate_table(workload: Workload, target: Target) -> tuple[tuple[MappedNest, ...], tuple[Verdict, ...]]:
    """Every candidate of the workload's dtype (all intrinsics, in registry order) and its verdict on ``target``."""
    op = operator_of(workload)
    nests = [MappedNest(workload, Candidate(intrinsic, mapping))
             for intrinsic in intrinsics_for(workload.dtype)
             for mapping in enumerate_candidates(op, intrinsic_computation(intrinsic))]
    return tuple(nests), tuple(judge(nests, target))


class MappingSpace(Space):
    """Intrinsic mapping candidates and the tiles of the loops they leave (see the module docs).

    Args:
        workload: a conv2d or matmul, float32, int8 or bf16.
        target: the LLVM CPU target.
        prepacked: kernels take the weights pre-packed (packing not timed).
        only: restrict the space to this candidate (see :meth:`restricted`).
    """

    name = "mapping"
    builder_class = MappingBuilder
    supported_dtypes = ("float32", "int8", "bf16")
    feature_names = FEATURE_NAMES

    def __init__(self, workload: Workload, target: Target, *, prepacked: bool = False, only: int | None = None):
        super().__init__(workload, target)
        if target.kind != "llvm":
            raise SpaceError(f"the mapping space targets LLVM CPUs; got target kind {target.kind!r}")
        if not isinstance(workload, (Conv2d, Matmul)):
            raise SpaceError(f"the mapping space supports conv2d and matmul, not {workload.op}")
        if workload.dtype not in self.supported_dtypes:
            raise SpaceError(f"the mapping space supports dtypes {self.supported_dtypes}, not {workload.dtype!r}")
        self.prepacked = bool(prepacked)
        self.nests, self.verdicts = candidate_table(workload, target)
        self.kept = tuple(i for i, v in enumerate(self.verdicts) if v.kept)
        if not self.kept:
            example: dict[str, str] = {}
            for nest, verdict in zip(self.nests, self.verdicts):
                example.setdefault(verdict.rule, f"{nest.candidate.label}: {verdict.reason}")
            raise SpaceError(f"no mapping candidate of {workload.label} can run on {target.label} (of "
                             f"{len(self.nests)}, e.g. " + "; ".join(example.values()) + ")")
        if only is not None:
            if not isinstance(only, (int, np.integer)) or not 0 <= only < len(self.nests):
                raise SpaceError(f"candidate must be an index in [0, {len(self.nests) - 1}], got {only!r}")
            if not self.verdicts[only].kept:
                raise SpaceError(f"candidate {only} ({self.nests[only].candidate.label}) is "
                                 f"{self.verdicts[only].fate}: {self.verdicts[only].reason}")
            only = int(only)
        self.only = only
        # No cap on innermost tiles (Ansor's 64): the register rule bounds the register block, and a long
        # innermost reduction keeps it in registers longer.
        self.tilings = tuple(LoopTiling(n.loops, unroll_choices=UNROLL_CHOICES,
                                        max_innermost=max(lp.extent for lp in n.loops)) for n in self.nests)
        self.coordinates: tuple[Coordinate, ...] = _union_coordinates(self.tilings[i] for i in self.kept)
        self.generic_feature_names = generic_feature_names(self)

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "prepacked": self.prepacked, "only": self.only}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], prepacked=state["prepacked"], only=state["only"])

    # -- candidates -------------------------------------------------------------------------------
    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(n.candidate.label for n in self.nests)

    def candidate_of(self, config: Config) -> int:
        value = config.get("candidate") if isinstance(config, Config) else None
        if not isinstance(value, int) or not 0 <= value < len(self.nests):
            raise SpaceError(f"config has no valid 'candidate' knob: {config!r}")
        return value

    def restricted(self, candidate: int) -> "MappingSpace":
        if candidate == self.only:
            return self
        return MappingSpace(self.workload, self.target, prepacked=self.prepacked, only=candidate)

    @property
    def choices(self) -> tuple[int, ...]:
        """The candidates this space samples from: the kept ones (one when restricted)."""
        return (self.only,) if self.only is not None else self.kept

    def nest(self, config: Config) -> MappedNest:
        return self.nests[self.candidate_of(config)]

    def tiling_of(self, config: Config) -> LoopTiling:
        """The tile knobs of the config's candidate (what the GA's mutation rules read: loops, levels, extents)."""
        return self.tilings[self.candidate_of(config)]

    # -- validity -----------------------------------------------------------------------------------
    def check(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise SpaceError(f"expected a Config, got {type(config).__name__}")
        index = self.candidate_of(config)
        verdict = self.verdicts[index]
        if not verdict.kept:
            raise SpaceError(f"candidate {index} ({self.candidates[index]}) is {verdict.fate} by rule "
                             f"{verdict.rule!r}: {verdict.reason}")
        if self.only is not None and index != self.only:
            raise SpaceError(f"this space is restricted to candidate {self.only}, not {index}")
        tiling = self.tilings[index]
        knobs = tiling.knobs | {"candidate", "prepacked"}
        if set(config) != knobs:
            raise SpaceError(f"a config of candidate {index} ({self.candidates[index]}) has knobs {sorted(knobs)}; "
                             f"got {sorted(config)}")
        if config["prepacked"] != int(self.prepacked):
            raise SpaceError(f"this space {'takes pre-packed weights' if self.prepacked else 'packs in the kernel'}: "
                             f"'prepacked' must be {int(self.prepacked)}, got {config['prepacked']!r}")
        tiling.check(config)
        problem = register_block_fits(self.nests[index], self._register_block(index, config), self.target)
        if problem:
            raise SpaceError(problem)

    def _register_block(self, index: int, values) -> dict[str, int]:
        return {lp.name: values[lp.name][3] for lp in self.nests[index].spatial}

    # -- sampling and moves -------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        index = self.choices[int(rng.integers(len(self.choices)))]
        values = self.tilings[index].sample(rng)
        return self._make(index, self._fit_register_block(index, values))

    def _make(self, index: int, values: dict[str, Any]) -> Config:
        return Config({**values, "candidate": index, "prepacked": int(self.prepacked)})

    def _fit_register_block(self, index: int, values: dict[str, Any]) -> dict[str, Any]:
        """Move factors of the register block (level 3) out to level 2 until it fits (smallest factors first)."""
        nest = self.nests[index]
        values = dict(values)
        for _ in range(MAX_REPAIRS):
            if register_block_fits(nest, self._register_block(index, values), self.target) is None:
                return values
            name = max((lp.name for lp in nest.spatial), key=lambda n: values[n][3])
            tiles = list(values[name])
            if tiles[3] == 1:
                break
            factor = min(p for p in range(2, tiles[3] + 1) if tiles[3] % p == 0)
            tiles[2] *= factor
            tiles[3] //= factor
            values[name] = tuple(tiles)
        raise SpaceError(f"no register block of {self.candidates[index]} fits this CPU's registers / L1")

    def switch(self, config: Config, candidate: int) -> Config | None:
        """``config`` moved to another kept candidate, its tiles carried over loop by loop (None: not allowed)."""
        current = self.candidate_of(config)
        if candidate == current or candidate not in self.choices:
            return None
        tiling = self.tilings[candidate]
        values: dict[str, Any] = {"unroll": config["unroll"], "cache_write": config["cache_write"]}
        for lp in tiling.loops:
            old = config.get(lp.name)
            if old is not None and len(old) == tiling.levels[lp.name] and prod(old) == lp.extent:
                values[lp.name] = old
            else:
                wanted = old if old is not None else (1,) * tiling.levels[lp.name]
                values[lp.name] = project_tiles(lp.extent, tiling.levels[lp.name], wanted, tiling.max_innermost)
        return self._make(candidate, self._fit_register_block(candidate, values))

    def hop(self, config: Config, coordinate: int, direction: int) -> Config | None:
        """Move coordinate ``coordinate`` (of :attr:`coordinates`) one step; None if it leaves the space."""
        tiling = self.tiling_of(config)
        coord = self.coordinates[coordinate]
        local = _local_index(tiling, coord)
        if local is None:
            return None
        moved = tiling.hop(config, local, direction)
        if moved is None or not self._fits(moved):
            return None
        return moved

    def _fits(self, config: Config) -> bool:
        index = self.candidate_of(config)
        return register_block_fits(self.nests[index], self._register_block(index, config), self.target) is None

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        """Tile hops of ``hops`` distinct coordinates; for ``hops == 1`` also a switch to each other candidate."""
        if hops < 1:
            raise ValueError(f"hops must be >= 1, got {hops}")
        self.check(config)
        out = self.tiling_of(config).neighbours(config, hops, valid=self._fits)
        if hops == 1:
            seen = set(out)
            for index in self.choices:
                moved = self.switch(config, index)
                if moved is not None and moved not in seen:
                    seen.add(moved)
                    out.append(moved)
        return out

    def hop_mask(self, config: Config) -> np.ndarray:
        """``mask[2 * i + (0 if up else 1)]``: whether hopping coordinate ``i`` up/down stays in the space."""
        return np.array([self.hop(config, i, d) is not None for i in range(len(self.coordinates)) for d in (1, -1)],
                        dtype=bool)

    # -- encoding and features ---------------------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return len(self.nests) + len(self.coordinates)

    def encode(self, config: Config) -> np.ndarray:
        """The candidate one-hot, then each coordinate's position in its choices (0 where the candidate lacks it)."""
        index = self.candidate_of(config)
        out = np.zeros(self.encoding_size, dtype=np.float32)
        out[index] = 1.0
        tiling = self.tilings[index]
        for i, coord in enumerate(self.coordinates):
            local = _local_index(tiling, coord)
            if local is not None:
                choices = tiling.coordinates[local].choices
                span = len(choices) - 1
                out[len(self.nests) + i] = tiling.coordinate_index(config, tiling.coordinates[local]) / span \
                    if span else 0.0
        return out

    def features(self, config: Config) -> np.ndarray:
        return mapping_features(self, config)

    def scaled_features(self, config: Config) -> np.ndarray:
        return scaled(mapping_features(self, config))

    def normalised_features(self, config: Config) -> np.ndarray:
        return normalise(mapping_features(self, config))

    def generic_features(self, config: Config) -> np.ndarray:
        return generic_features(self, config)

    # -- description -----------------------------------------------------------------------------------------
    def describe(self, config: Config) -> str:
        return f"{self.candidates[self.candidate_of(config)]} | {self.tiling_of(config).describe(config)}"

    def info(self, config: Config) -> dict[str, Any]:
        nest = self.nest(config)
        return {
            "packing": "pre-packed weights" if self.prepacked else "in-kernel",
            "candidate": self.candidate_of(config),
            "mapping": nest.candidate.label,
            "intrinsic": nest.intrinsic.name,
            "instruction": nest.intrinsic.instruction,
            "fused": nest.describe(),
            "layouts": nest.packing(),
            "resources": nest.resources.to_json(),
            "unit": self.workload.throughput_unit,
        }

    def best_by_candidate(self, records: Sequence[Record]) -> dict[int, tuple[float, int]]:
        """Candidate -> (best throughput, number of correct records) over ``records`` of this space's configs."""
        out: dict[int, tuple[float, int]] = {}
        for record in records:
            config = record.config
            if not record.ok or config.get("prepacked") != int(self.prepacked) or "candidate" not in config:
                continue
            best, count = out.get(config["candidate"], (0.0, 0))
            out[config["candidate"]] = (max(best, record.gflops or 0.0), count + 1)
        return out

    @cached_property
    def table(self) -> list[dict[str, Any]]:
        """One row per candidate: label, fused loops, packing, resources, fate and rule (for ``tensorgym mapping``)."""
        return [{"candidate": i, "label": n.candidate.label, "intrinsic": n.intrinsic.name, "fused": n.describe(),
                 "packing": n.packing(), "resources": n.resources, "fate": v.fate, "rule": v.rule,
                 "reason": v.reason} for i, (n, v) in enumerate(zip(self.nests, self.verdicts))]


def _local_index(tiling: LoopTiling, coord: Coordinate) -> int | None:
    for i, own in enumerate(tiling.coordinates):
        if own.knob == coord.knob and own.level == coord.level:
            return i
    return None


def _union_coordinates(tilings) -> tuple[Coordinate, ...]:
    """Every (knob, level) some tiling has, in first-seen order; choices are the first tiling's (labels matter)."""
    seen: dict[tuple[str, int], Coordinate] = {}
    for tiling in tilings:
        for coord in tiling.coordinates:
            seen.setdefault((coord.knob, coord.level), coord)
    scalars = [seen.pop(key) for key in (("unroll", -1), ("cache_write", -1)) if key in seen]
    return tuple(itertools.chain(seen.values(), scalars))
