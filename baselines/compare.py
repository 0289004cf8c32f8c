"""The ``compare`` run: every agent on every env, same budget, same machine, one database; a table and plots.

:func:`compare` runs each (env, seed, agent) in turn, in one process, never
two measurements at once, all into one tensorgym database, and times the
vendor library once per env (conv2d: PyTorch/oneDNN NCHW and NHWC; matmul:
NumPy and PyTorch; int8 and bf16: the references of :mod:`.vendor`). With
``dtype="int8"`` or ``"bf16"`` the search agents tune in the ``mapping`` space
(``space=`` chooses another). Agents are built by name through
:func:`tensorgym.agents.make_agent`, so every registered agent can take part.

**Networks.** A layer is a network of one task, and a network is compared the
same way (``tensorgym compare-network``): its env id (``Network-ResNet18-v0``,
or a :class:`~tensorgym.networks.Network`) is an env of the board, its agents
are task schedulers (:func:`tensorgym.catalog.make_scheduler`: round-robin,
gradient, dual-task, ...) over its network env, its GFLOP/s are its layers'
FLOPs over its estimated latency, and its vendor row is PyTorch's weighted sum
over the same layers (:func:`.vendor.time_network_references`). Its runs are
made in this process and are not re-timed. A comparison is of layers or of
networks, not both. The envs of every run are made in one place
(``_run_local``), over one :class:`~tensorgym.context.TuningContext`.

Because the agents share the database, an agent may find a config another
agent already measured. The :class:`~tensorgym.tuner.Tuner` charges such a
replayed record one trial and the wall seconds its measurement took when it
was made, so every agent's clock reads as if it had measured alone.

**The table** (:class:`Leaderboard`): per env x agent, the best GFLOP/s
after 16/32/64/128 measurements and after 60 s / 120 s of tuning clock
(:meth:`TuningResult.best_at`), the final best, and the number of
measurements needed to reach 95 % of the run's own final best; each as the
mean and min-max over seeds. The vendor libraries are extra rows. For the
MetaSchedule peer the per-point columns read MetaSchedule's own timeline
(its own timing) and ``final`` its best schedules re-timed by tensorgym's
measurer (``TuningResult.best_gflops``). Then the methodology score of each
agent over measurements and over tuning clock, and the area under its
best-so-far curve (:mod:`.methodology`).

**Outputs** in ``out_dir``: ``compare.csv`` (one line per env, agent,
metric), ``compare.json`` (the table, vendor timings, settings, result
files), ``compare.md`` (the table in Markdown), ``results/<env>/<agent>-seed<N>.json``
(every :class:`TuningResult`), ``vendor/<env>.json`` and
``plots/<env>.png`` (best-so-far vs measurements and vs seconds, one line
per agent: mean over seeds with a min-max band, a dot where the runs
ended; vendors as horizontal lines), and ``compare.html``, one
self-contained page with the table and the plots.

**On a Ray cluster** (``ray=``): each run is a job on a measuring node (one
at a time per node, :mod:`tensorgym.cluster`); every record is committed to
the one database before the run goes on; results, tables and plots are the
same files as a local run's. The vendor timings and the re-timing rounds of
an env are one job each, so that one machine times all of an env's winners.

**Re-measured winners.** Every run ends with its best config, the best of
many noisy measurements, so it is biased upward, and on a shared 2-vCPU
machine the speed of the same kernel drifts by several percent over minutes
(10-15 % was seen, in bad minutes far more). So after all runs of an env,
each run's best config and the vendor libraries are timed again,
``remeasure`` rounds, interleaved (round 1: every run's winner, then the
vendors; round 2: the same again, ...), and the median of the rounds is the
``re-timed`` column: the fairest number of the table. It is stored in each
result's ``extra["remeasured_gflops"]`` (and the samples next to it).

**The winner against the vendor, paired.** Two separate re-timings carry
whatever the machine did between them: on a shared VM the ratio of a kernel's
re-timing to a vendor's moves by as much as the machine drifts from minute to
minute. Two timings a few milliseconds apart share the VM's state. So
(``paired_vendor``, on by default; with ``remeasure`` > 0) each env's best
winner (the best run's config by re-timed GFLOP/s) is then timed against its
vendor reference in one process, each of its samples between two of the
vendor's (:func:`.vendor.time_against_vendor`). One line per env after the
table (:meth:`.board.Leaderboard.paired_vendor_lines`, also in ``compare.md``
and ``compare.html``) gives that paired ratio (the kernel's GFLOP/s over the
vendor's), its spread, the vendor's drift and the hypervisor's steal
meanwhile, beside the ratio of the same process's two separate timings. The
reference is the fastest re-timed per-call one, as the vendor line's, among
those that process can call: PyTorch's float32 references (not NumPy's
OpenBLAS, not int8 or bf16). It is kept in that reference's entry
(``"paired"``) of ``vendor/<env>.json``, so a resumed compare reuses it while
the winner is the same. It needs this machine's CPU: with ``ray=`` the
re-timed column is a cluster node's, and with a remote or GPU target the
kernel cannot share a process with the vendor; it is then left out (logged).

**Resume.** A finished (env, agent, seed) run's result file is reused when
the settings match, and so are vendor timings and the paired one; an interrupted
run is redone, cheaply, because the database answers every measurement it had finished.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from tensorgym.catalog import ENVS, make_agent, make_scheduler, make_space, space_class
from tensorgym.checks import choice, integer, is_integer, number
from tensorgym.config import Config
from tensorgym.context import TuningContext
from tensorgym.database import Database, DatabaseError, database_path, default_path
from tensorgym.envs.base import tuning_env
from tensorgym.envs.network_env import NetworkEnv, default_agent
from tensorgym.envs.registration import PARAMETRIC_IDS, make_env, workload_of
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.landscape.shipped import AnotherCPULandscape
from tensorgym.measure import Measurer
from tensorgym.measure.contention import is_busy
from tensorgym.measure.protocol import robust_spread
from tensorgym.measure.tasks import build
from tensorgym.networks import Network, resolve_network
from tensorgym.record import BUSY_SHARE
from tensorgym.spaces.base import Space
from tensorgym.target import Target, resolve_target
from tensorgym.text import slug
from tensorgym.tuner import ProgressBarCallback, TuningResult, check_budget
from tensorgym.workloads import Workload

from .board import DEFAULT_TIME_POINTS, DEFAULT_TRIAL_POINTS, LandscapeFacts, Leaderboard
from .render import plot_curves, write_html, write_tables
from .vendor import (
    PAIRED_BACKENDS, PER_CALL, best_vendor, time_against_vendor, time_network_references, time_references, time_vendor,
)

log = logging.getLogger(__name__)

DEFAULT_AGENTS = ("random", "ga", "dgd", "optuna", "metaschedule")
DEFAULT_SCHEDULERS = ("round-robin", "gradient", "dual-task")  # the agents of a network's comparison
BACKENDS = ("tvm", "landscape")
# The landscape leaderboard's agents and points: a run costs no measurement, so it reads further.
LANDSCAPE_AGENTS = ("random", "ga", "dgd", "ga-random-model", "dgd-random-model", "optuna")
LANDSCAPE_TRIAL_POINTS = (16, 32, 64, 128, 256, 512)
LANDSCAPE_TIME_POINTS = (30.0, 60.0, 120.0, 300.0)
NETWORK_ID_PREFIX = "Network-"  # env ids of networks (Network-ResNet18-v0), which task schedulers tune
PAIRED_PAIRS = 30  # samples of the winner, each between two of the vendor's (paired_vendor)
_Saved = TypeVar("_Saved")  # a TuningResult, vendor timings


def _parse_seeds(seeds: int | Sequence[int]) -> list[int]:
    if is_integer(seeds):
        return list(range(integer("seeds", seeds, minimum=1)))
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise InvalidTypeError(f"seeds is a count or a list of seeds, got {type(seeds).__name__}")
    out = [integer("a seed", s, minimum=0) for s in seeds]
    if not out or len(set(out)) != len(out):
        raise InvalidArgumentError(f"seeds must be distinct and not empty, got {list(seeds)}")
    return out


def _parse_names(names: str | Sequence[str], what: str = "agents") -> list[str]:
    """Distinct names from a list or a comma-separated string (``what``: agents, or a network's schedulers)."""
    if not isinstance(names, str) and not (isinstance(names, Sequence) and all(isinstance(a, str) for a in names)):
        raise InvalidTypeError(f"{what} is a list of {what[:-1]} names or a comma-separated string, got "
                               f"{names!r:.60}")
    out = [a.strip() for a in (names.split(",") if isinstance(names, str) else names) if a.strip()]
    if not out or len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what} must be distinct names, got {names!r}")
    return out


def _out_dir(out_dir: Any) -> Path:
    if isinstance(out_dir, os.PathLike):
        out_dir = os.fspath(out_dir)
    if not isinstance(out_dir, str):
        raise InvalidTypeError(f"out_dir must be a directory path, got {type(out_dir).__name__}")
    if not out_dir.strip():
        raise InvalidArgumentError("the output directory is an empty path; name one (default: compare-results)")
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise InvalidArgumentError(f"the output directory {out} is a file")
    return out


def _make_dirs(path: Path) -> list[Path]:
    """``mkdir -p path``; returns the directories it created (outermost first)."""
    created = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        created.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    return created[::-1]


def _digest(settings: Mapping[str, Any], length: int = 16) -> str:
    """A run's settings as a short hash: part of its result file's name, or kept in it, so a resume reuses
    only the runs made with the same settings."""
    return hashlib.sha256(json.dumps(dict(settings), sort_keys=True, default=str).encode()).hexdigest()[:length]


def _result_path(out_dir: Path, env_id: str, agent: str, seed: int, options: Mapping[str, Any] | None) -> Path:
    suffix = f"-{_digest(options, 8)}" if options else ""
    return out_dir / "results" / slug(env_id) / f"{slug(agent)}{suffix}-seed{seed}.json"


def _read_saved(path: Path, parse: Callable[[Any], _Saved] = lambda data: data,
                usable: Callable[[_Saved], bool] = lambda saved: True) -> _Saved | None:
    """What a run saved at ``path`` (a result, ``parse``: its type's ``from_json``; vendor timings), None when
    nothing was, it cannot be read (logged), or it is not ``usable`` (made with other settings, of other
    layers): it is then made again (cheaply for a run: the database answers what it had measured)."""
    if not path.exists():
        return None
    try:
        saved = parse(json.loads(path.read_text()))
        return saved if usable(saved) else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return None


@contextlib.contextmanager
def _noting_failure(errors: list[dict[str, Any]], run: dict[str, Any]) -> Iterator[None]:
    """Runs the block; an exception it raises is logged and noted in ``errors`` (``run``: which run, then the
    error and the seconds it took), not raised: one failed run must not end a comparison."""
    t0 = time.monotonic()
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - see above
        log.exception("compare: %s failed", ", ".join(f"{k} {v}" for k, v in run.items()))
        errors.append({**run, "error": f"{type(exc).__name__}: {exc}"[:2000], "seconds": time.monotonic() - t0})


def _cached_vendor(path: Path, time_them: Callable[[], Any], usable: Callable[[Any], bool] = lambda data: True
                   ) -> Any:
    """The vendor timings saved at ``path`` when usable, else ``time_them()``'s, saved there for a resume."""
    timings = _read_saved(path, usable=usable)
    if timings is None:
        timings = time_them()
        _write_json(path, timings)
    return timings


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def compare(env_ids: "Sequence[str | Network] | str | Network", agents: str | Sequence[str] = DEFAULT_AGENTS,
            budget: int | None = 128, seeds: int | Sequence[int] = 3, db: str | Path | None = None,
            time_points: Sequence[float] | None = DEFAULT_TIME_POINTS,
            trial_points: Sequence[int] | None = DEFAULT_TRIAL_POINTS, out_dir: str | Path = "compare-results", *,
            time_budget: float | None = None, agent_options: Mapping[str, Mapping[str, Any]] | None = None,
            vendor: bool = True, plot: bool = True, progress: bool = True, remeasure: int = 3,
            shape: Mapping[str, Any] | None = None, native_blas: bool = False, target: Target | str | None = None,
            ray: str | None = None, space: str | None = None, dtype: str | None = "float32",
            measure_per_round: int | None = None, search: str | None = None,
            search_options: Mapping[str, Any] | None = None, backend: str = "tvm", landscape: str | None = None,
            jobs: int | None = None, paired_vendor: bool = True) -> Leaderboard:
    """Run every agent on every env with the same budget, one at a time, into one database.

    Args:
        env_ids: registered env ids (``tensorgym list``), or networks (a :class:`~tensorgym.networks.Network`,
            or a built-in network's id such as ``Network-ResNet18-v0``); layers or networks, not both.
        agents: agent names (a list, or comma-separated), built with ``make_agent``; for networks, task
            scheduler names, built with ``make_scheduler``.
        budget: measurements per run (over a network's layers); time_budget: seconds of tuning clock per run.
        seeds: a number of seeds (0..n-1) or the seeds themselves.
        db: the tensorgym database every run measures into (created if missing; default:
            :func:`tensorgym.database.default_path`).
        time_points, trial_points: where the table reads the best-so-far curves (None: 25, 50 and 100 % of
            the shortest run's clock, of the budget).
        out_dir: where results, tables and plots go; also the resume cache.
        agent_options: keyword arguments per agent (or scheduler) name, for ``make_agent`` (``make_scheduler``).
        vendor: time the vendor libraries (a network's: PyTorch's weighted sum); plot: write the PNGs.
        remeasure: rounds of re-timing every run's best config and the vendors at the end (0: none; layers).
        progress: progress bars.
        shape: the shape of the parametric ids among ``env_ids`` (``tensorgym/Matmul-v0``
            needs ``{"M": .., "N": .., "K": ..}``); suite layers have theirs.
        native_blas: clear the machine's OpenBLAS overrides in the vendor processes
            (:data:`tensorgym.baselines.vendor.BLAS_OVERRIDES`).
        target: where kernels are timed: this machine (default) or a remote device
            (:func:`tensorgym.remote_target`; the vendor libraries, which run here, are then left out).
        ray: ``"auto"`` or a Ray head's ``HOST:PORT``: spread the runs over that cluster's
            measuring nodes (:mod:`tensorgym.cluster`), every record still committed to ``db``;
            with a remote ``target`` the nodes build and the device servers of its key time.
            ``None`` (default): every run in this process, Ray not imported. Layers only.
        space: the space the search agents tune in (default: each agent's own, ``tiles`` for most and for
            networks; ``mapping`` when ``dtype`` is not float32). The MetaSchedule peer searches its own space
            whatever this is.
        dtype: the workloads' data type (``"float32"``, ``"int8"``, ``"bf16"``; None: as given); another than
            float32 is part of the ids the table and the files use (``Conv2d-ResNet18-C7-v0[dtype=int8]``).
        measure_per_round, search, search_options: a network's trials per round (default: Ansor's), the search
            inside its layers and its options (default: the network env's).
        backend: ``"tvm"`` (compile and time) or ``"landscape"``: every run answered from the layer's shipped
            landscape (:mod:`tensorgym.landscape`; nothing compiled, no database, no vendors), ``jobs`` runs at a
            time in their own processes (default: one per core; ``jobs=1`` runs them in this process, where
            agents registered at run time are known), scored against the true optimum.
        landscape: the CPU folder of the landscapes to use (default: this CPU's, else another CPU's, with a note).
        paired_vendor: after the re-timing, time the env's best winner against its vendor reference in one
            process (see the module docs; layers on this machine's CPU with ``remeasure`` > 0 and ``vendor``).
            False: not timed, and a paired timing an earlier run saved in ``out_dir`` is dropped.

    Returns the :class:`Leaderboard` (also written to ``out_dir``).
    """
    choice("backend", backend, BACKENDS)
    tuned = _tuned(env_ids, shape, dtype)
    env_ids = list(tuned)
    networks = isinstance(next(iter(tuned.values())), Network)
    if backend == "landscape":
        return _compare_on_landscapes(tuned, _parse_names(agents), budget, _parse_seeds(seeds), time_points,
                                      trial_points, out_dir, time_budget, agent_options, plot, progress, space,
                                      landscape, jobs, networks, ray)
    default_space = space or ("mapping" if dtype not in (None, "float32") else "tiles" if networks else None)
    names = _parse_names(agents)
    seed_list = _parse_seeds(seeds)
    options = {name: dict((agent_options or {}).get(name, {})) for name in names}
    make = make_scheduler if networks else make_agent
    built = {name: make(name, **options[name]) for name in names}  # fails early on unknown names
    for agent in built.values():
        if not networks:
            agent.check_space(default_space or agent.env_space)  # fails early on an agent that cannot tune there
    check_budget(budget, time_budget)
    trial_points = None if trial_points is None else tuple(integer("a trial point", p, minimum=1)
                                                           for p in trial_points)
    time_points = None if time_points is None else tuple(number("a time point", t, positive=True)
                                                         for t in time_points)
    remeasure = integer("remeasure", remeasure, minimum=0)
    if not isinstance(paired_vendor, bool):
        raise InvalidTypeError(f"paired_vendor must be True or False, got {type(paired_vendor).__name__}")
    target = resolve_target(target)
    if networks:
        if ray is not None:
            raise InvalidArgumentError("a network's runs are run in this process; ray= spreads the runs of layers")
        for network in tuned.values():
            _check_network(network, default_space, search, search_options or {}, target)
    if target.remote is not None and vendor:
        log.warning("compare: the vendor libraries run on this machine, not on %s: no vendor rows", target.label)
        vendor = False
    pairing = paired_vendor and vendor and remeasure > 0 and not networks
    if pairing and (ray is not None or target.kind != "llvm"):
        # One process must call both the kernel and the vendor library, on the CPU the re-timed column was timed on.
        log.info("compare: the winners are not timed against the vendors in one process %s",
                 "on a Ray cluster (its nodes re-time them)" if ray is not None else f"on {target.label}")
        pairing = False
    out = _out_dir(out_dir)
    db_path = database_path(db) if db is not None else default_path()
    # Everything that can be refused was checked: now the output directory and the database.
    created = _make_dirs(out)
    board = Leaderboard(env_ids=env_ids, agents=names, seeds=seed_list, budget=budget, time_budget=time_budget,
                        trial_points=trial_points, time_points=time_points)
    board.labels.update({env_id: _label(item) for env_id, item in tuned.items()})
    plan = _Plan(tuned, [(e, s, a) for e in env_ids for s in seed_list for a in names], built, options, budget,
                 time_budget, out, vendor, remeasure, progress, native_blas, default_space, measure_per_round,
                 search, dict(search_options or {}), pairing)
    try:
        if ray is None:
            _run_local(board, plan, db_path, target)
        else:  # each node times on its own CPU, unless the kernels go to a remote device
            _run_on_ray(board, plan, db_path, ray, target if target.remote is not None else None)
    except DatabaseError:
        for directory in reversed(created):  # a database that cannot be opened leaves no directory behind
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    if not paired_vendor:
        _drop_paired(board, plan)
    write_tables(board, out)
    plots = plot_curves(board, out) if plot else []
    write_html(board, out, plots)
    return board


def _tuned(env_ids: "Sequence[str | Network] | str | Network", shape: Mapping[str, Any] | None,
           dtype: str | None) -> "dict[str, Workload | Network]":
    """The board's env ids and what each tunes: a layer's workload, or a network (a layer is a network of one
    task, but its agents are searches, a network's are schedulers: a comparison is of layers or of networks)."""
    entries = [env_ids] if isinstance(env_ids, (str, Network)) else list(env_ids)
    if not entries:
        raise InvalidArgumentError("give at least one env id (see `tensorgym list`)")
    if shape and not any(entry in PARAMETRIC_IDS for entry in entries):
        raise InvalidArgumentError(f"a shape is for {' and '.join(PARAMETRIC_IDS)}; none of "
                                   f"{', '.join(map(str, entries))} takes one (suite layers have theirs)")
    tuned: dict[str, Workload | Network] = {}
    for entry in entries:
        if isinstance(entry, Network) or (isinstance(entry, str) and entry.startswith(NETWORK_ID_PREFIX)):
            network = resolve_network(entry)
            item, env_id, own = network.with_dtype(dtype) if dtype else network, network.env_id, None
        else:
            own = shape if entry in PARAMETRIC_IDS else None
            item, env_id = workload_of(entry, own), entry
            item = item.with_dtype(dtype) if dtype else item
        # A custom shape and a non-default dtype are part of the id the table, the files and the resume cache use.
        parts = [f"{k}={v}" for k, v in (own or {}).items()] + ([f"dtype={dtype}"] if dtype not in (None, "float32")
                                                                else [])
        tuned.setdefault(f"{env_id}[{','.join(parts)}]" if parts else env_id, item)
    if len({isinstance(item, Network) for item in tuned.values()}) > 1:
        raise InvalidArgumentError("compare layers or networks, not both: a layer's agents are searches, a "
                                   "network's are task schedulers")
    return tuned


def _label(item: "Workload | Network") -> str:
    return item.name if isinstance(item, Network) else item.label


def _check_network(network: Network, space: str, search: str | None, search_options: Mapping[str, Any],
                   target: Target) -> None:
    """Refuse, before any file is made, what the network env would: a search that cannot work in ``space``, or
    a layer's dtype ``space`` does not schedule on ``target``."""
    make_agent(search or default_agent(space), **search_options).check_space(space)
    supported = space_class(space).for_target(target).supported_dtypes
    unsupported = sorted({t.workload.dtype for t in network.tasks} - set(supported))
    if unsupported:
        raise InvalidArgumentError(f"the {space!r} space schedules {', '.join(supported)}, not "
                                   f"{', '.join(unsupported)}; choose another --space or --dtype")


@dataclass(frozen=True)
class _Plan:
    """What a compare run does, whoever runs it (this process, or a Ray cluster)."""

    tuned: "dict[str, Workload | Network]"  # env id -> the layer's workload, or the network
    runs: list[tuple[str, int, str]]  # (env id, seed, agent name), in table order
    agents: dict[str, Any]  # name -> the agent (a network's: the task scheduler)
    options: dict[str, dict[str, Any]]
    budget: int | None
    time_budget: float | None
    out: Path
    vendor: bool
    remeasure: int
    progress: bool
    native_blas: bool = False
    space: str | None = None  # the space every search agent tunes in (None: each agent's own)
    measure_per_round: int | None = None  # a network's trials per round (None: Ansor's)
    search: str | None = None  # the search inside a network's layers (None: the network env's)
    search_options: dict[str, Any] | None = None
    paired_vendor: bool = False  # time each env's best winner against its vendor in one process (module docs)

    def env_space(self, agent) -> str:
        """The space of the env ``agent`` tunes (the plan's, or the agent's own; a network's: the plan's)."""
        return self.space if self.space is not None else agent.env_space

    def tune_options(self, env_id: str) -> dict[str, Any]:
        """What a run's ``tune`` takes beside the budget: a network's scheduler, its round size."""
        return {"measure_per_round": self.measure_per_round} if isinstance(self.tuned[env_id], Network) else {}

    def result_path(self, env_id: str, agent: str, seed: int) -> Path:
        # A space other than the agent's own is part of the run's identity (and of its file name), and so are
        # a network's layers, rounds and search.
        network = self.tuned[env_id]
        options = {**self.options[agent], **({"space": self.space} if self.space else {}),
                   **({"network": network.to_json(), "measure_per_round": self.measure_per_round,
                       "search": self.search, "search_options": self.search_options}
                      if isinstance(network, Network) else {})}
        return _result_path(self.out, env_id, agent, seed, options)

    def saved_result(self, env_id: str, agent: str, seed: int) -> TuningResult | None:
        return _read_saved(self.result_path(env_id, agent, seed), TuningResult.from_json,
                           lambda r: (r.budget, r.time_budget) == (self.budget, self.time_budget))

    def vendor_path(self, env_id: str) -> Path:
        return self.out / "vendor" / f"{slug(env_id)}.json"

    def vendor_timings(self, env_id: str) -> list[dict[str, Any]]:
        """The vendor references of ``env_id`` (a layer's, or a network's weighted sum), saved for a resume; a
        network's saved ones are reused when they are of the same layers."""
        item = self.tuned[env_id]
        if not isinstance(item, Network):
            return _cached_vendor(self.vendor_path(env_id), functools.partial(
                time_references, item, native_blas=self.native_blas))
        keys = [t.workload.key for t in item.tasks]
        return _cached_vendor(self.vendor_path(env_id), functools.partial(
            time_network_references, item, native_blas=self.native_blas, progress=self.progress),
            lambda refs: [[layer.get("key") for layer in ref.get("layers", [])] for ref in refs] == [keys])

    def progress_bar(self):
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=len(self.runs), desc="compare", unit="run", position=0, dynamic_ncols=True)


def _add_result(board: Leaderboard, env_id: str, agent: str, result: TuningResult, path: Path) -> None:
    board.results.setdefault((env_id, agent), []).append(result)
    board.result_files.setdefault((env_id, agent), []).append(str(path))


def open_env(item: "Workload | Network", space: str, context: TuningContext, search: str | None = None,
             search_options: Mapping[str, Any] | None = None) -> gym.Env:
    """The env a run of the comparison tunes ``item`` in, over ``context``: a layer's env of ``space``, or a network's
    (``search``: the search inside its layers). The one place the runs' envs, and so their evaluators, are made
    (in this process and on a Ray node)."""
    if isinstance(item, Network):
        return NetworkEnv(item, space=space, context=context, agent=search, agent_options=search_options)
    return make_env(item, space=space, context=context)


def _run_local(board: Leaderboard, plan: _Plan, db_path: str | Path, target: Target) -> None:
    """Every run in turn in this process, in one tuning context: one database, the process's measurer of the
    target."""
    bar = plan.progress_bar()
    context = TuningContext.shared(target, db_path)
    envs_open: dict[tuple[str, str], gym.Env] = {}

    def env_for(env_id: str, space: str) -> gym.Env:
        if (env_id, space) not in envs_open:
            envs_open[(env_id, space)] = open_env(plan.tuned[env_id], space, context, plan.search,
                                                  plan.search_options)
        return envs_open[(env_id, space)]

    try:
        _ = context.database  # opened now: a database that cannot be used ends the run before it starts
    except BaseException:
        context.close()
        raise

    try:
        if plan.vendor:
            for env_id in plan.tuned:
                board.vendor[env_id] = plan.vendor_timings(env_id)
        for env_id, seed, name in plan.runs:
            agent = plan.agents[name]
            path = plan.result_path(env_id, name, seed)
            result = plan.saved_result(env_id, name, seed)
            if result is None:
                if bar is not None:
                    bar.set_postfix_str(f"{env_id} {name} seed {seed}")
                log.info("compare: %s, agent %s, seed %d", env_id, name, seed)
                with _noting_failure(board.errors, {"env": env_id, "agent": name, "seed": seed}):
                    result = agent.tune(env_for(env_id, plan.env_space(agent)), budget=plan.budget,
                                        time_budget=plan.time_budget, seed=seed,
                                        callback=ProgressBarCallback() if plan.progress else None,
                                        **plan.tune_options(env_id))
                if result is None:  # it failed (noted in board.errors)
                    if bar is not None:
                        bar.update(1)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                result.save(path)
            _add_result(board, env_id, name, result, path)
            if bar is not None:
                bar.update(1)
        if plan.remeasure > 0:
            for env_id in board.env_ids:
                runs, refs = _to_retime(board, env_id, plan.remeasure)
                if runs or refs:
                    spaces = {r.space: _space_for(env_for, env_id, r.space, plan.space or "tiles")
                              for _, _, r in runs}
                    kernel_values, vendor_values = retime_interleaved(
                        context.measurer, [(spaces[r.space], r.best_config) for _, _, r in runs],
                        [(plan.tuned[env_id], ref["backend"], ref.get("choice") or ref["layout"]) for ref in refs],
                        plan.remeasure, f"re-timing {env_id}", plan.progress, plan.native_blas)
                    _store_retimes(board, env_id, runs, refs, kernel_values, vendor_values, plan)
                if plan.paired_vendor:  # also when every round was saved: a paired timing may not have been
                    _pair_winner(board, env_id, plan, functools.partial(_space_for, env_for, env_id,
                                                                        env_space=plan.space or "tiles"))
    finally:
        if bar is not None:
            bar.close()
        for env in envs_open.values():
            env.close()
        context.close()


def _run_on_ray(board: Leaderboard, plan: _Plan, db_path: str | Path, address: str, target: Target | None) -> None:
    """The same runs as jobs on a Ray cluster: one per measuring node at a time, records into ``db_path``.

    Vendor timings and the re-timing rounds of an env are jobs too, each on one node,
    so that a table's re-timed column compares kernels timed on one machine. With a
    remote ``target`` the nodes build and the device servers behind its tracker time.
    """
    from tensorgym.cluster import MeasuringCluster

    bar = plan.progress_bar()
    try:
        with MeasuringCluster(address, db_path) as cluster:
            jobs: dict[Any, tuple] = {}
            for env_id, workload in plan.tuned.items():
                cached = _read_saved(plan.vendor_path(env_id)) if plan.vendor else None
                if cached is not None:
                    board.vendor[env_id] = cached
                elif plan.vendor:
                    jobs[cluster.submit(_vendor_job, workload, plan.native_blas, tag=f"vendor {env_id}")] = (
                        "vendor", env_id)
            finished: dict[tuple[str, int, str], TuningResult] = {}
            for env_id, seed, name in plan.runs:
                result = plan.saved_result(env_id, name, seed)
                if result is not None:
                    finished[(env_id, seed, name)] = result
                    continue
                tag = f"{env_id} {name} seed {seed}"
                handle = cluster.submit(_tune_job, plan.tuned[env_id], name, plan.options[name], seed,
                                        plan.budget, plan.time_budget, target, plan.space, tag=tag)
                jobs[handle] = ("run", env_id, seed, name)
            if bar is not None:
                bar.update(len(finished))
            for handle, outcome in cluster.as_completed(list(jobs)):
                kind, env_id, *rest = jobs[handle]
                if kind == "vendor":
                    board.vendor[env_id] = outcome.value if outcome.ok else []
                    if outcome.ok:
                        _write_json(plan.vendor_path(env_id), outcome.value)
                    else:
                        log.warning("compare: vendor timings of %s failed: %s", env_id, outcome.error)
                    continue
                seed, name = rest
                if bar is not None:
                    bar.update(1)
                if not outcome.ok:
                    board.errors.append({"env": env_id, "agent": name, "seed": seed, "error": outcome.error,
                                         "seconds": None})
                    continue
                result = TuningResult.from_json(outcome.value)
                path = plan.result_path(env_id, name, seed)
                path.parent.mkdir(parents=True, exist_ok=True)
                result.save(path)
                finished[(env_id, seed, name)] = result
            for env_id, seed, name in plan.runs:  # the table's order, whatever order the runs ended in
                if (env_id, seed, name) in finished:
                    _add_result(board, env_id, name, finished[(env_id, seed, name)],
                                plan.result_path(env_id, name, seed))
            targets = {r.target for results in board.results.values() for r in results}
            if len(targets) > 1:
                log.warning("compare: the runs were measured on %d different machines (fingerprints %s): their "
                            "GFLOP/s are not comparable; give the cluster identical measuring nodes",
                            len(targets), ", ".join(sorted(targets)))
            if plan.remeasure > 0:
                _retime_on_ray(board, plan, cluster, target)
            board.cluster.update({"address": address, "writer": cluster.stats()})
    finally:
        if bar is not None:
            bar.close()


def _retime_on_ray(board: Leaderboard, plan: _Plan, cluster, target: Target | None) -> None:
    """One re-timing job per env (its winners and vendors, interleaved on one node), all envs at once."""
    retimes = {}
    for env_id in board.env_ids:
        runs, refs = _to_retime(board, env_id, plan.remeasure)
        if runs or refs:
            handle = cluster.submit(_retime_job, plan.tuned[env_id], [(r.space, r.best_config) for _, _, r in runs],
                                    [(ref["backend"], ref.get("choice") or ref["layout"]) for ref in refs],
                                    plan.remeasure, target, plan.native_blas, tag=f"re-timing {env_id}")
            retimes[handle] = (env_id, runs, refs)
    for handle, outcome in cluster.as_completed(list(retimes)):
        env_id, runs, refs = retimes[handle]
        if outcome.ok:
            _store_retimes(board, env_id, runs, refs, *outcome.value, plan)
        else:
            log.warning("compare: re-timing %s failed: %s", env_id, outcome.error)


# -- jobs on a Ray node (``db`` is the node's view of the user's database) --------------------------------
def _tune_job(db: Database, workload: Workload, agent: str, options: dict[str, Any], seed: int,
              budget: int | None, time_budget: float | None, target: Target | None,
              space: str | None = None) -> dict[str, Any]:
    tuner = make_agent(agent, **options)
    context = TuningContext.shared(target, db)
    env = open_env(workload, space or tuner.env_space, context)
    try:
        return tuner.tune(env, budget=budget, time_budget=time_budget, seed=seed).to_json()
    finally:
        env.close()
        context.close()


def _vendor_job(db: Database, workload: Workload, native_blas: bool = False) -> list[dict[str, Any]]:
    return time_references(workload, native_blas=native_blas)


def _retime_job(db: Database, workload: Workload, kernels: Sequence[tuple[str, Config]],
                vendors: Sequence[tuple[str, str]], rounds: int, target: Target | None, native_blas: bool = False
                ) -> Retimed:
    with Measurer(target) as measurer:
        spaces = {name: make_space(name, workload, measurer.target) for name, _ in kernels}
        return retime_interleaved(measurer, [(spaces[name], config) for name, config in kernels],
                                  [(workload, backend, layout) for backend, layout in vendors], rounds,
                                  native_blas=native_blas)


@dataclass
class Retimed:
    """What :func:`retime_interleaved` measured: GFLOP/s per round of each kernel and each vendor.

    ``*_busy[i]`` says that every round of that kernel or vendor was taken on a busy machine, so its
    values are what a busy machine gave. Unpacks as ``kernels, vendors``.
    """

    kernels: list[list[float]]
    vendors: list[list[float]]
    kernels_busy: list[bool]
    vendors_busy: list[bool]

    def __iter__(self) -> Iterator[list[list[float]]]:
        yield self.kernels
        yield self.vendors


def retime_interleaved(measurer, kernels: Sequence[tuple[Any, Any]], vendors: Sequence[tuple[Any, str, str]],
                       rounds: int, label: str = "re-timing", progress: bool = False, native_blas: bool = False
                       ) -> Retimed:
    """Time kernels ``(space, config)`` and vendor references ``(workload, backend, layout)`` again.

    ``rounds`` rounds, each timing every kernel then every vendor once, so that
    a slow minute of the machine hits all of them alike. Returns the GFLOP/s of
    each kernel and each vendor, one value per round (failed ones left out, and
    so are timings the measurer knows were taken on a busy machine, unless every
    round of that kernel or vendor was: then they are all there is).
    """
    kernel_values: list[list[float]] = [[] for _ in kernels]
    vendor_values: list[list[float]] = [[] for _ in vendors]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=rounds * (len(kernels) + len(vendors)), desc=label, unit="kernel", dynamic_ncols=True)
    kernel_busy: list[list[float]] = [[] for _ in kernels]
    vendor_busy: list[list[float]] = [[] for _ in vendors]
    for _ in range(rounds):
        for values, busy, (space, config) in zip(kernel_values, kernel_busy, kernels):
            record = measurer.measure(space, [config], check=False)[0]
            if record.ok:
                (busy if record.busy else values).append(record.gflops)
            if bar is not None:
                bar.update(1)
        for values, busy, (workload, backend, layout) in zip(vendor_values, vendor_busy, vendors):
            try:
                ref = time_vendor(workload, backend, layout, native_blas=native_blas)
                (busy if ref.busy else values).append(ref.gflops)
            except RuntimeError as exc:
                log.warning("re-timing %s %s on %s: %s", backend, layout, workload.label, exc)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    all_busy = [not values and bool(busy) for values, busy in zip(kernel_values + vendor_values,
                                                                   kernel_busy + vendor_busy)]
    for values, busy in zip(kernel_values + vendor_values, kernel_busy + vendor_busy):
        if not values:
            values.extend(busy)
    return Retimed(kernel_values, vendor_values, all_busy[:len(kernels)], all_busy[len(kernels):])


def _to_retime(board: Leaderboard, env_id: str, rounds: int) -> tuple[list, list]:
    """The runs ``(agent, index, result)`` and vendor references of ``env_id`` not yet re-timed ``rounds`` times."""
    runs = [(name, i, r) for name in board.agents for i, r in enumerate(board.results.get((env_id, name), []))
            if r.best_config is not None and _rounds_done(r.extra) < rounds]
    refs = [ref for ref in board.vendor.get(env_id, []) if ref.get("gflops") is not None and "backend" in ref
            and _rounds_done(ref) < rounds]
    return runs, refs


def _rounds_done(facts: dict[str, Any]) -> int:
    """How many re-timing rounds a result or vendor reference has had (busy rounds leave no sample behind)."""
    return int(facts.get("remeasured_rounds", len(facts.get("remeasured_samples", ()))))


def _store_retimes(board: Leaderboard, env_id: str, runs: list, refs: list, kernel_values: list[list[float]],
                   vendor_values: list[list[float]], plan: _Plan) -> None:
    """Keep the re-timed values in the results (and their files) and the vendor references (and theirs)."""
    for (name, i, result), values in zip(runs, kernel_values):
        result.extra["remeasured_samples"] = values
        result.extra["remeasured_gflops"] = median_or_none(values)
        result.extra["remeasured_rounds"] = plan.remeasure
        result.save(board.result_files[(env_id, name)][i])
    for ref, values in zip(refs, vendor_values):
        ref["remeasured_samples"] = values
        ref["remeasured_gflops"] = median_or_none(values)
        ref["remeasured_rounds"] = plan.remeasure
    if refs:
        _write_json(plan.vendor_path(env_id), board.vendor[env_id])


def _space_for(env_for, env_id: str, space: str, env_space: str = "tiles") -> Space:
    """The space object to re-time a result of ``space`` on ``env_id``: the env's own where one exists
    (results of spaces without an env, MetaSchedule's, are re-timed through an ``env_space`` env)."""
    return space_of(env_for(env_id, space if space in ENVS else env_space), space)


def space_of(env, space: str) -> Space:
    """The space named ``space`` over ``env``'s workload: the env's own if it is that space."""
    env = tuning_env(env)
    return env.search_space if env.search_space.name == space else make_space(space, env.workload, env.target)


def busy_summary(board: Leaderboard) -> str:
    """One line saying how many timings of a compare run were taken on a busy machine ("" if none)."""
    trials = sum(r.extra.get("busy_trials", 0) for runs in board.results.values() for r in runs)
    vendors = sum(1 for refs in board.vendor.values() for ref in refs if is_busy(ref.get("contention")))
    if not trials and not vendors:
        return ""
    return (f"warning: the machine was busy: {trials} trial(s) and {vendors} vendor timing(s) saw other processes "
            f"take more than {BUSY_SHARE:.0%} of the cores (their GFLOP/s are what a busy machine gave)")


def median_or_none(values: Sequence[float]) -> float | None:
    """The median of re-timed values, None when every round failed."""
    return float(np.median(values)) if values else None


# -- the winner against the vendor, in one process ---------------------------------------------------------------
def paired_reference(refs: Sequence[dict[str, Any]], workload: Workload, per_call: bool = True
                     ) -> dict[str, Any] | None:
    """The vendor reference a winner is timed against in one process: the fastest of ``refs`` (re-timed where it
    was) that :func:`.vendor.time_against_vendor` can call, a per-call one first with ``per_call`` (as the vendor
    line compares: a compare run's kernels pack their inputs in every call); None when none can be (int8, bf16)."""
    if workload.dtype != "float32":
        return None
    pairable = [ref for ref in refs if ref.get("backend") in PAIRED_BACKENDS]
    return (best_vendor(pairable, PER_CALL) if per_call else None) or best_vendor(pairable)


def time_paired_vendor(space: Space, config: Config, ref: Mapping[str, Any], *, pairs: int = PAIRED_PAIRS,
                       native_blas: bool = False) -> dict[str, Any]:
    """``config`` of ``space`` built here and timed against the vendor reference ``ref`` (a
    ``VendorResult.to_json()`` dict) in one fresh process (:func:`.vendor.time_against_vendor`), on this CPU.

    Ratios read as the table's: the kernel's GFLOP/s over the vendor's (above 1, the kernel is faster).
    ``speedup``: the median of the ``pairs`` paired samples, ``spread``: their robust spread (1.4826 MAD /
    median), ``speedup_apart``: the same process's two separate timings; ``vendor_drift``: the vendor's median
    sample while paired over its separate timing, minus one; ``steal``: the hypervisor's share of the cores
    meanwhile (None where the machine does not tell). Also the kernel (``space``, ``config``), the vendor as
    that process named it (``vendor_process``) and its raw figures (``latency_ratios``: each paired sample's
    kernel latency over the vendor's).
    """
    with tempfile.TemporaryDirectory(prefix="tensorgym-paired-") as work:
        builder = space.builder()
        built = build(builder, config, work)
        timing = time_against_vendor(builder, config, built["path"], ref["backend"],
                                     ref.get("choice") or ref["layout"], pairs=pairs, native_blas=native_blas)
    speedups = [1.0 / r for r in timing["paired_ratios"]]
    return {"space": space.name, "config": config.to_json(), "pairs": pairs,
            "speedup": float(np.median(speedups)), "spread": robust_spread(speedups),
            "speedup_apart": timing["vendor_s"] / timing["kernel_s"],
            "vendor_drift": timing.get("vendor_drift"), "steal": timing.get("steal"),
            "vendor_process": timing["vendor"], "thread_pools": timing["thread_pools"],
            "kernel_s": timing["kernel_s"], "vendor_s": timing["vendor_s"],
            "latency_ratios": timing["paired_ratios"]}


def _winner(board: Leaderboard, env_id: str) -> tuple[str, TuningResult] | None:
    """The env's best run ``(agent, result)`` by re-timed GFLOP/s (None when none was re-timed)."""
    runs = [(name, r) for name in board.agents for r in board.results.get((env_id, name), [])
            if r.best_config is not None and r.extra.get("remeasured_gflops")]
    return max(runs, key=lambda run: run[1].extra["remeasured_gflops"], default=None)


def _pair_winner(board: Leaderboard, env_id: str, plan: _Plan, space_for: Callable[[str], Space]) -> None:
    """Time ``env_id``'s best winner against its vendor reference in one process (see the module docs), into
    that reference's ``"paired"`` entry and the env's vendor file; one saved of the same kernel, run and
    reference is reused. ``space_for``: the space object of a result's space name."""
    refs = board.vendor.get(env_id, [])
    winner, ref = _winner(board, env_id), paired_reference(refs, plan.tuned[env_id])
    if winner is None or ref is None:
        log.info("compare: %s's winner is not timed against a vendor in one process: %s", env_id,
                 "no winner was re-timed" if winner is None else "no vendor reference can share its process")
        return
    agent, result = winner
    held = ref.get("paired") or {}
    if (held.get("agent"), held.get("seed"), held.get("space"), held.get("config"), held.get("pairs")) == (
            agent, result.seed, result.space, result.best_config.to_json(), PAIRED_PAIRS):
        return
    for other in refs:  # a saved one is of another winner or reference: the line must not name it
        other.pop("paired", None)
    log.info("compare: timing %s's winner (%s, seed %d) against %s in one process", env_id, agent, result.seed,
             ref.get("library"))
    try:
        ref["paired"] = {"agent": agent, "seed": result.seed, **time_paired_vendor(
            space_for(result.space), result.best_config, ref, native_blas=plan.native_blas)}
    except Exception as exc:  # noqa: BLE001 - the table and the re-timed column stand without it
        log.warning("compare: timing %s's winner against %s in one process failed: %s", env_id,
                    ref.get("library"), f"{type(exc).__name__}: {exc}"[:500])
    _write_json(plan.vendor_path(env_id), refs)


def _drop_paired(board: Leaderboard, plan: _Plan) -> None:
    """Remove the paired timings a run saved (a compare with ``paired_vendor=False``): from the board, and from
    the vendor files, which are the board's vendor entries."""
    for env_id, refs in board.vendor.items():
        if any("paired" in ref for ref in refs):
            for ref in refs:
                ref.pop("paired", None)
            _write_json(plan.vendor_path(env_id), refs)


# -- on landscapes -----------------------------------------------------------------------------------------------
def _compare_on_landscapes(tuned: "dict[str, Workload | Network]", names: list[str], budget: int | None,
                           seeds: list[int], time_points, trial_points, out_dir, time_budget: float | None,
                           agent_options, plot: bool, progress: bool, space: str | None, landscape: str | None,
                           jobs: int | None, networks: bool, ray: str | None) -> Leaderboard:
    """:func:`compare` with ``backend="landscape"``: every run answered from its layer's landscape (see there)."""
    from tensorgym.landscape import Landscape, find_landscape, warn_if_another_cpu
    from tensorgym.landscape.shipped import LANDSCAPE_SPACES

    if networks:
        raise InvalidArgumentError("landscapes are of layers: compare a network with backend='tvm'")
    if ray is not None:
        raise InvalidArgumentError("backend='landscape' runs on this machine's cores (jobs=); ray= spreads "
                                   "measuring runs")
    options = {name: dict((agent_options or {}).get(name, {})) for name in names}
    agents = {name: make_agent(name, **options[name]) for name in names}
    if space is None:  # the agents' own space when they share one (random-structured: microkernel), else tiles
        spaces = {agent.env_space for agent in agents.values()}
        space = spaces.pop() if len(spaces) == 1 else "tiles"
    if space not in LANDSCAPE_SPACES:
        raise InvalidArgumentError(f"landscapes are of the {' or '.join(LANDSCAPE_SPACES)} space, not {space!r}")
    for agent in agents.values():
        agent.check_space(space)  # one line: the agent works in other spaces
    check_budget(budget, time_budget)
    jobs = integer("jobs", jobs if jobs is not None else (os.cpu_count() or 1), minimum=1)
    board = Leaderboard(env_ids=list(tuned), agents=names, seeds=seeds, budget=budget, time_budget=time_budget,
                        trial_points=None if trial_points is None else tuple(trial_points),
                        time_points=None if time_points is None else tuple(time_points))
    paths: dict[str, Path] = {}
    for env_id, workload in tuned.items():  # every landscape found before anything runs
        paths[env_id] = find_landscape(workload, space, cpu=landscape)
        land = Landscape.load(paths[env_id])
        warn_if_another_cpu(land.cpu_folder)
        board.labels[env_id] = workload.label
        board.landscapes[env_id] = LandscapeFacts(
            optimum_gflops=float(land.scores.max()), scores=np.asarray(land.scores, dtype=float),
            seconds_per_trial=float(np.mean(land.wall_s)), cpu=land.cpu_label, path=str(paths[env_id]),
            digest=hashlib.sha256(paths[env_id].read_bytes()).hexdigest()[:16])
    out = _out_dir(out_dir)
    _make_dirs(out)
    runs = [(e, s, a) for e in tuned for s in seeds for a in names]
    todo = []
    for env_id, seed, name in runs:
        # Keyed by the landscape's content: the same file in another checkout (another path) resumes.
        path = _result_path(out, env_id, name, seed, {**options[name], "backend": "landscape",
                                                     "landscape": board.landscapes[env_id].digest})
        saved = _read_saved(path, TuningResult.from_json,
                            lambda r: (r.budget, r.time_budget) == (budget, time_budget))
        if saved is None:
            todo.append((env_id, seed, name, path))
        else:
            _add_result(board, env_id, name, saved, path)
    start = time.monotonic()
    spent = {"agent_and_loop_s": 0.0, "simulation_s": 0.0}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="compare (landscape)", unit="run",
                   dynamic_ncols=True)
    try:
        def finished(env_id, seed, name, path, outcome) -> None:
            with _noting_failure(board.errors, {"env": env_id, "agent": name, "seed": seed}):
                wall, simulation = outcome()
                spent["agent_and_loop_s"] += wall - simulation
                spent["simulation_s"] += simulation
                _add_result(board, env_id, name, TuningResult.from_json(json.loads(path.read_text())), path)
            if bar is not None:
                bar.update(1)

        def job(env_id, seed, name, path):
            return (_landscape_run, tuned[env_id].to_json(), str(paths[env_id]), name, options[name], seed, budget,
                    time_budget, str(path), space)

        if todo and jobs == 1:  # in this process: no __main__ guard needed, agents registered here are known
            for item in todo:
                finished(*item, functools.partial(*job(*item)))
        elif todo:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # Spawned workers: a fresh interpreter each, whatever this process imported (TVM's threads do not fork).
            with ProcessPoolExecutor(max_workers=min(jobs, len(todo)),
                                     mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(*job(*item)): item for item in todo}
                for future in as_completed(futures):
                    finished(*futures[future], future.result)
    finally:
        if bar is not None:
            bar.close()
    board.timing = {"runs_now": len(todo), "jobs": jobs, "wall_s": time.monotonic() - start, **spent}
    # Results arrive in completion order: the table and the files read them in seed order.
    for key, results in board.results.items():
        order = sorted(range(len(results)), key=lambda i: results[i].seed)
        board.results[key] = [results[i] for i in order]
        board.result_files[key] = [board.result_files[key][i] for i in order]
    write_tables(board, out)
    plots = plot_curves(board, out) if plot else []
    write_html(board, out, plots)
    return board


def _landscape_run(workload_json: dict[str, Any], landscape_path: str, name: str, options: dict[str, Any], seed: int,
                   budget: int | None, time_budget: float | None, out_path: str,
                   space: str = "tiles") -> tuple[float, float]:
    """One run of a landscape comparison, in a worker process: ``name`` tunes the layer's landscape env; its result
    goes to ``out_path``. Returns the run's wall seconds and the share of them spent answering from the landscape."""
    start = time.monotonic()
    with warnings.catch_warnings():  # the board said whose landscape it is, once, before the runs
        warnings.simplefilter("ignore", AnotherCPULandscape)
        env = make_env(Workload.from_json(workload_json), space=space, backend="landscape",
                       landscape=landscape_path)
    try:
        result = make_agent(name, **options).tune(env, budget=budget, time_budget=time_budget, seed=seed)
        simulation = float(getattr(tuning_env(env).evaluator, "seconds", 0.0))
    finally:
        env.close()
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    result.save(out_path)
    return time.monotonic() - start, simulation
