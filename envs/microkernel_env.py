"""Microkernel construction environment: build one seed-003 configuration per episode.

Each episode builds a config of the :class:`~tensorgym.spaces.MicrokernelSpace`
one decision at a time, inside out for the microkernel and outside in for the
tiles, then measures the kernel:

======== =======================================================================
phase    choice (one action)
======== =======================================================================
kernel   a calibrated microkernel of the catalogue (its ``h`` is ``h1``)
partner  ``single`` (its ``h`` must divide the extent), or the ``h2`` of a second
         microkernel of the same class for a λ-combination
a, b     (combination only) the multiplicities: ``a*h1 + b*h2`` must divide the extent
reuse    the trip count of the reuse loop on the reduction dimension directly
         around the microkernel (a divisor of what the microkernel leaves)
tiles    repeatedly: a tile loop ``(loop, trip count > 1)``, placed *inside* the
         loops chosen before (outermost first), its trip count a divisor of what
         is left of that loop, so every tile divides its enclosing tile; or, for
         a combination, the λ entry (once nothing is left of the composition
         loop). The phase ends when every loop is covered.
parallel ``p``: fuse the ``p`` outermost tile loops into the parallel loop (0 to
         the number of leading spatial loops)
======== =======================================================================

**Actions.** One fixed ``Discrete(n)`` space, a segment per phase (see
:attr:`MicrokernelEnv.segments`); ``info["action_mask"]`` and
:meth:`action_masks` offer exactly the actions of the current phase that keep
the configuration completable and valid (every masked-in path ends in a
config the space accepts). An action outside ``Discrete(n)`` raises
``ValueError``; a masked action costs :data:`INVALID_ACTION_PENALTY` and
leaves the state unchanged.

**Reward.** 0 for every construction step; at the end the kernel is compiled,
checked and timed, and the reward is its throughput as a fraction of this
machine's *measured* fp32 FMA peak (stored with the microkernel catalogue):
1.0 would be every core issuing an FMA every cycle, on any layer, so rewards
mean the same everywhere. A kernel that fails to build or run, or computes a
wrong result, gives :data:`FAILED_KERNEL_PENALTY`. The episode then
terminates (measurements are cached in the database, so rebuilding a known
config costs nothing).

**Observation.** ``Box(0, 1)``: the phase (one-hot), the chosen microkernel's
sizes and measured fraction of peak, the combination and its multiplicities,
the reuse loop, per loop what is left to tile and how many tile loops it has,
the λ state, the stack length, the leading spatial loops, and the workload's
extents on a log scale (so one policy can serve every layer).

**Catalogue.** The env needs this machine's calibrated microkernels. The space
only loads a catalogue; calibrating is a measuring job above it
(:mod:`tensorgym.calibration`), which the env runs on first use: a machine
without a stored catalogue gets the quick one (22 microkernels, about 10 s on 2
cores, with a progress bar and a note that ``tensorgym microkernels calibrate``
measures the full one, several minutes, which is not something to start silently
inside ``gym.make``). ``auto_calibrate=False`` raises
:class:`~tensorgym.spaces.microkernel.CatalogueMissing` instead, which says to run
``tensorgym microkernels calibrate``.

**Construction without measuring.** :class:`MicrokernelConstruction` holds the
phases, masks and observations: everything but the measurement at the end.
The env measures what it builds; the ``rl`` agent builds with the same rules
and measures through the Tuner's loop.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from tensorgym.calibration import stored_or_quick_catalogue
from tensorgym.config import Config
from tensorgym.errors import InvalidArgumentError, TensorgymError
from tensorgym.factors import divisors
from tensorgym.spaces.microkernel import LAMBDA, MicrokernelSpace, Selection
from tensorgym.spaces.microkernel.space import log_ratio
from tensorgym.target import resolve_target
from tensorgym.workloads import Workload

from .base import TuningEnv, check_reset_options, refuse_landscape, target_of
from .tile_hop import FAILED_KERNEL_PENALTY, INVALID_ACTION_PENALTY

UNMEASURED_PEAK_GFLOPS = 1000.0  # reward scale when the catalogue carries no measured peak (tests)
PHASES = ("kernel", "partner", "a", "b", "reuse", "tiles", "parallel")
MAX_H = 16  # largest microkernel h (the partner segment has one action per h)

# The observation, in order (see :meth:`MicrokernelConstruction.observe`): values per part.
OBSERVATION_PARTS = {
    "phase": len(PHASES),  # one-hot
    "kernel": 7,  # vec, w, c, r, s, h, measured fraction of peak
    "combination": 5,  # single, combined, h2, a, b
    "reuse": 1,
    "per_loop": 3,  # per loop of the workload: what is left to tile, its tile loops, its extent
    "stack": 4,  # λ pending, λ placed, stack length, leading spatial loops
    "op": 2,  # conv2d, matmul
}


def observation_size(loops: int) -> int:
    """Length of the observation for a workload with ``loops`` loops."""
    return sum(OBSERVATION_PARTS.values()) + (loops - 1) * OBSERVATION_PARTS["per_loop"]


class MicrokernelConstruction:
    """The microkernel env's construction of one config, with no measuring (see the module docs).

    Holds the action layout over a :class:`~tensorgym.spaces.MicrokernelSpace` and the state of one
    construction: :meth:`begin` starts one, :meth:`action_masks` offers the actions of the current phase,
    :meth:`take` applies an offered one, and once :attr:`complete` the built :attr:`config` is what an
    episode measures. The env keeps this state in its own attributes (it subclasses this).
    """

    space_name = "microkernel"

    def __init__(self, space: MicrokernelSpace):
        self._init_construction(space)

    def _init_construction(self, space: MicrokernelSpace) -> None:
        self.search_space = space
        self.kernels = sorted({s.kernel for s in space.selections})
        self._kernel_index = {mk: i for i, mk in enumerate(self.kernels)}
        self._by_kernel: dict[Any, list[Selection]] = {}
        for sel in space.selections:
            self._by_kernel.setdefault(sel.kernel, []).append(sel)
        self.reuse_dim = space.roles["reuse"]
        self.comp_dim = space.roles["comp"]
        self.reuse_choices = divisors(space.extents[self.reuse_dim])
        self.tile_choices: list[tuple[str, int]] = [(LAMBDA, 1)]
        for dim in space.dims:
            self.tile_choices += [(dim, n) for n in divisors(space.extents[dim])[1:]]
        self._tile_index = {choice: i for i, choice in enumerate(self.tile_choices)}
        sizes = {"kernel": len(self.kernels), "partner": MAX_H + 1, "a": space.max_multiplicity,
                 "b": space.max_multiplicity, "reuse": len(self.reuse_choices), "tiles": len(self.tile_choices),
                 "parallel": space.max_stack + 1}
        self.segments: dict[str, range] = {}
        offset = 0
        for phase in PHASES:
            self.segments[phase] = range(offset, offset + sizes[phase])
            offset += sizes[phase]
        self.action_space = spaces.Discrete(offset)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(observation_size(len(space.dims)),), dtype=np.float32)
        self._phase: str | None = None
        self._config: Config | None = None

    def begin(self) -> None:
        """Start a construction (the first phase: pick a microkernel)."""
        space = self.search_space
        self._phase = "kernel"
        self._kernel = None
        self._partner: int | None = None  # 0: single, else h2
        self._a = self._b = None
        self._selection: Selection | None = None
        self._reuse: int | None = None
        self._q: dict[str, int] = dict(space.extents)
        self._stack: list[tuple[str, int]] = []
        self._lambda_placed = False
        self._config = None

    def take(self, action: int) -> None:
        """Apply ``action``, an action :meth:`action_masks` offers; the construction is :attr:`complete` once
        the last phase is taken."""
        getattr(self, f"_take_{self._phase}")(action - self.segments[self._phase].start)

    @property
    def complete(self) -> bool:
        """The config is built (the env measures it next)."""
        return self._phase == "measure"

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the actions valid now (for MaskablePPO); all False once the episode ended."""
        if self._phase is None:
            raise ResetNeeded("call reset() before action_masks()")
        mask = np.zeros(self.action_space.n, dtype=bool)
        if self._phase not in self.segments:
            return mask
        segment = self.segments[self._phase]
        for choice in self._valid_choices():
            mask[segment.start + choice] = True
        return mask

    # -- phases -------------------------------------------------------------------------------------
    def _valid_choices(self) -> list[int]:
        space = self.search_space
        phase = self._phase
        if phase == "kernel":
            return list(range(len(self.kernels)))  # every listed kernel starts at least one selection
        if phase == "partner":
            out = set()
            for sel in self._by_kernel[self._kernel]:
                out.add(0 if sel.combo is None else sel.combo[2])
            return sorted(out)
        if phase == "a":
            return sorted({sel.combo[1] - 1 for sel in self._combos()})
        if phase == "b":
            return sorted({sel.combo[3] - 1 for sel in self._combos() if sel.combo[1] == self._a})
        if phase == "reuse":
            q = self._q[self.reuse_dim]
            return [i for i, f in enumerate(self.reuse_choices) if q % f == 0]
        if phase == "tiles":
            out = []
            for i, (dim, n) in enumerate(self.tile_choices):
                if dim == LAMBDA:
                    if self._selection.combo is not None and not self._lambda_placed and self._q[self.comp_dim] == 1:
                        out.append(i)
                elif self._q[dim] % n == 0 and not (self._lambda_placed and dim == self.comp_dim):
                    out.append(i)
            return out
        if phase == "parallel":
            return list(range(space.parallel_run(self._stack) + 1))
        return []

    def _combos(self) -> list[Selection]:
        return [s for s in self._by_kernel[self._kernel] if s.combo is not None and s.combo[2] == self._partner]

    def _take_kernel(self, choice: int) -> None:
        self._kernel = self.kernels[choice]
        self._phase = "partner"

    def _take_partner(self, choice: int) -> None:
        self._partner = choice
        if choice == 0:
            self._select(Selection(self._kernel))
        else:
            self._phase = "a"

    def _take_a(self, choice: int) -> None:
        self._a = choice + 1
        self._phase = "b"

    def _take_b(self, choice: int) -> None:
        self._b = choice + 1
        self._select(Selection(self._kernel, (self._kernel.h, self._a, self._partner, self._b)))

    def _select(self, selection: Selection) -> None:
        space = self.search_space
        self._selection = selection
        self._q = space.quotients(selection)
        self._phase = "reuse"

    def _take_reuse(self, choice: int) -> None:
        self._reuse = self.reuse_choices[choice]
        self._q[self.reuse_dim] //= self._reuse
        self._phase = "tiles"
        self._finish_tiles_if_done()

    def _take_tiles(self, choice: int) -> None:
        dim, n = self.tile_choices[choice]
        self._stack.append((dim, n))
        if dim == LAMBDA:
            self._lambda_placed = True
        else:
            self._q[dim] //= n
        self._finish_tiles_if_done()

    def _finish_tiles_if_done(self) -> None:
        covered = all(v == 1 for v in self._q.values())
        if covered and (self._selection.combo is None or self._lambda_placed):
            self._phase = "parallel"

    def _take_parallel(self, choice: int) -> None:
        space = self.search_space
        self._config = space.make_config(self._selection, self._reuse, self._stack, choice)
        self._phase = "measure"

    # -- observation -----------------------------------------------------------------------
    def observe(self) -> np.ndarray:
        """The observation of the construction so far."""
        space = self.search_space
        obs: list[float] = [float(self._phase == p) for p in PHASES]
        mk = self._kernel
        if mk is not None:
            fraction = space.fractions.get(mk)
            obs += [mk.vec / 16, mk.w / 16, mk.c / 16, mk.r / 7, mk.s / 7, mk.h / MAX_H,
                    min(1.0, fraction) if fraction is not None else 0.0]
        else:
            obs += [0.0] * 7
        comp_extent = space.extents[self.comp_dim]
        obs += [float(self._partner == 0), float(bool(self._partner)), (self._partner or 0) / MAX_H,
                log_ratio(self._a or 1, comp_extent), log_ratio(self._b or 1, comp_extent)]
        obs += [log_ratio(self._reuse or 1, space.extents[self.reuse_dim])]
        levels = {d: 0 for d in space.dims}
        for dim, _ in self._stack:
            if dim != LAMBDA:
                levels[dim] += 1
        for dim in space.dims:
            extent = space.extents[dim]
            obs.append(log_ratio(self._q.get(dim, extent), extent))
            obs.append(min(1.0, levels[dim] / 4))
            obs.append(math.log2(extent) / 12 if extent > 1 else 0.0)
        pending = self._selection is not None and self._selection.combo is not None and not self._lambda_placed
        obs += [float(pending), float(self._lambda_placed), len(self._stack) / space.max_stack,
                space.parallel_run(self._stack) / space.max_stack]
        obs += [float(space.op == "conv2d"), float(space.op == "matmul")]
        return np.clip(np.asarray(obs, dtype=np.float32), 0.0, 1.0)

    def _partial_description(self) -> str:
        parts = []
        if self._selection is not None:
            parts.append(self._selection.label)
        elif self._kernel is not None:
            parts.append(self._kernel.label)
        if self._reuse is not None:
            parts.append(f"reuse {self.reuse_dim}{self._reuse}")
        if self._stack:
            parts.append("tiles " + " ".join("λ" if d == LAMBDA else f"{d}{n}" for d, n in self._stack))
        return " | ".join(parts) or "-"

    @property
    def config(self) -> Config | None:
        """The config built in this episode, once complete."""
        return self._config if self._phase in ("measure", "done") else None


class MicrokernelEnv(TuningEnv[MicrokernelSpace], MicrokernelConstruction):
    """Construct a microkernel-space config step by step; the measured kernel gives the final reward.

    Keyword arguments other than :class:`~tensorgym.envs.base.TuningEnv`'s and ``auto_calibrate`` go to
    :class:`~tensorgym.spaces.MicrokernelSpace` (``catalogue``, ``threshold``, ``packing``, ``prepacked``,
    ``cache_dir``). Without a ``catalogue``, this machine's stored one is used; with none stored, a quick
    one is measured first (see the module docs), unless ``auto_calibrate=False``, which raises
    :class:`~tensorgym.spaces.microkernel.CatalogueMissing` instead.
    ``backend="replay"`` is not supported: every episode's config is measured.
    """

    space_name = "microkernel"

    def __init__(self, workload: Workload, *, auto_calibrate: bool = True, **kwargs: Any):
        if not self.landscape_backend:  # refused before a catalogue is calibrated
            refuse_landscape(self.space_name, kwargs.get("backend"), kwargs)
        if kwargs.get("backend") == "replay":
            raise InvalidArgumentError("backend='replay' is supported by the tiles env; "
                             "the microkernel env measures every episode's config")
        if kwargs.get("evaluator") is None and kwargs.get("catalogue") is None:
            catalogue = _catalogue_for(workload, target_of(kwargs), kwargs.get("cache_dir"), auto_calibrate)
            if catalogue is not None:
                kwargs["catalogue"] = catalogue
        super().__init__(workload, **kwargs)
        self._init_construction(self.search_space)
        self.reward_scale = self.search_space.peak_gflops or UNMEASURED_PEAK_GFLOPS
        self._steps = 0
        self._best = None
        self._last = None

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        check_reset_options(options, ())
        self.begin()
        self._steps = 0
        self._last = None
        return self.observe(), self._info("building")

    def step(self, action):
        if self._phase is None:
            raise ResetNeeded("call reset() before step()")
        if self._phase == "done":
            raise ResetNeeded("the episode has ended (the kernel was measured); call reset()")
        if not self.action_space.contains(action):
            raise InvalidArgumentError(f"action {action!r} is outside the action space "
                                       f"Discrete({self.action_space.n}); actions are integers in "
                                       f"[0, {self.action_space.n - 1}]")
        action = int(action)
        self._steps += 1
        if not self.action_masks()[action]:
            truncated = self._steps >= self.max_steps
            return self.observe(), INVALID_ACTION_PENALTY, False, truncated, self._info("masked")
        reward, terminated, status = 0.0, False, "building"
        self.take(action)
        if self.complete:
            reward, status = self._measure()
            terminated = True
            self._phase = "done"
        truncated = not terminated and self._steps >= self.max_steps
        return self.observe(), float(reward), terminated, truncated, self._info(status)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._phase is None:
            return None
        return f"{self.workload.label} [{self._phase}] {self._partial_description()}"

    def _measure(self) -> tuple[float, str]:
        record = self.evaluator.evaluate([self._config])[0]
        self._last = record
        if not record.ok:
            return FAILED_KERNEL_PENALTY, record.status.value
        if self._best is None or record.gflops > self._best.gflops:
            self._best = record
        return record.gflops / self.reward_scale, "ok"

    # -- info ---------------------------------------------------------------------------------------
    def _info(self, status: str) -> dict[str, Any]:
        info: dict[str, Any] = {
            "status": status,  # building, masked, or the measured kernel's: ok, build_error, ...
            "phase": self._phase,
            "action_mask": self.action_masks(),
            "best_gflops": self._best.gflops if self._best is not None else None,
            "best_config": self._best.config.to_json() if self._best is not None else None,
            "peak_gflops": self.reward_scale,
        }
        if self._last is not None:
            record = self._last
            info.update(config=record.config.to_json(), gflops=record.gflops, latency_s=record.latency_s,
                        latency_cv=record.latency_cv, timing=record.timing, busy=record.busy,
                        fraction_of_peak=(record.gflops / self.reward_scale) if record.ok else None,
                        measurements=self.evaluator.measured, **self.search_space.info(record.config))
        return info


def _catalogue_for(workload: Workload, target, cache_dir, auto_calibrate: bool):
    """This machine's catalogue for the env's space: the stored one, or a quick one calibrated now.

    The space loads catalogues and never measures; the env runs the calibration job (the space's
    first-use step) above it. Nothing is measured for a workload or target the env or the space
    refuses anyway: None then, and the env's own checks say why.
    """
    if not isinstance(workload, Workload):
        return None
    try:
        target = resolve_target(target)
        MicrokernelSpace.check_problem(workload, target)
    except (TensorgymError, ValueError, TypeError):
        return None
    return stored_or_quick_catalogue(target, cache_dir, auto_calibrate=auto_calibrate)
