"""The ``compare`` run: every agent on every env, same budget, same machine, one database; a table and plots.

:func:`compare` runs each (env, seed, agent) in turn, in one process, never
two measurements at once, all into one tensorgym database, and times the
vendor library once per env (conv2d: PyTorch/oneDNN NCHW and NHWC; matmul:
NumPy and PyTorch; int8 and bf16: the references of :mod:`.vendor`). With
``dtype="int8"`` or ``"bf16"`` the search agents tune in the ``mapping`` space
(``space=`` chooses another). Agents are built by name through
:func:`tensorgym.agents.make_agent`, so every registered agent can take part.

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
measurer (``TuningResult.best_gflops``).

**Outputs** in ``out_dir``: ``compare.csv`` (one line per env, agent,
metric), ``compare.json`` (the table, vendor timings, settings, result
files), ``compare.md`` (the table in Markdown), ``results/<env>/<agent>-seed<N>.json``
(every :class:`TuningResult`), ``vendor/<env>.json`` and
``plots/<env>.png`` (best-so-far vs measurements and vs seconds, one line
per agent: mean over seeds with a min-max band, a dot where the runs
ended; vendors as horizontal lines).

**Re-measured winners.** Every run ends with its best config, the best of
many noisy measurements, so it is biased upward, and on a shared 2-vCPU
machine the speed of the same kernel drifts by several percent over minutes
(10-15 % was seen, in bad minutes far more). So after all runs of an env,
each run's best config and the vendor libraries are timed again,
``remeasure`` rounds, interleaved (round 1: every run's winner, then the
vendors; round 2: the same again, ...), and the median of the rounds is the
``re-timed`` column: the fairest number of the table. It is stored in each
result's ``extra["remeasured_gflops"]`` (and the samples next to it).

**Resume.** A finished (env, agent, seed) run's result file is reused when
the settings match, and so are vendor timings; an interrupted run is redone,
cheaply, because the database answers every measurement it had finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.catalog import ENVS, make_agent, make_space
from tensorgym.database import Database, default_path
from tensorgym.envs.base import TuningEnv, tuning_env
from tensorgym.envs.registration import PARAMETRIC_IDS, make_env, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.measure import Measurer
from tensorgym.spaces.base import Space
from tensorgym.text import slug
from tensorgym.tuner import ProgressBarCallback, TuningResult, check_budget
from tensorgym.workloads import Workload

from .board import DEFAULT_TIME_POINTS, DEFAULT_TRIAL_POINTS, Leaderboard
from .render import plot_curves, write_tables
from .vendor import VendorUnavailable, time_vendor, vendor_choices

log = logging.getLogger(__name__)

DEFAULT_AGENTS = ("random", "ga", "dgd", "optuna", "metaschedule")


def _parse_seeds(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out or len(set(out)) != len(out):
        raise ValueError(f"seeds must be distinct and not empty, got {list(seeds)}")
    return out


def _parse_agents(agents: str | Sequence[str]) -> list[str]:
    names = [a.strip() for a in (agents.split(",") if isinstance(agents, str) else agents) if a.strip()]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"agents must be distinct names, got {agents!r}")
    return names


def _result_path(out_dir: Path, env_id: str, agent: str, seed: int, options: Mapping[str, Any] | None) -> Path:
    suffix = ""
    if options:
        digest = hashlib.sha256(json.dumps(dict(options), sort_keys=True, default=str).encode()).hexdigest()[:8]
        suffix = f"-{digest}"
    return out_dir / "results" / slug(env_id) / f"{slug(agent)}{suffix}-seed{seed}.json"


def _load_result(path: Path, budget: int | None, time_budget: float | None) -> TuningResult | None:
    if not path.exists():
        return None
    try:
        result = TuningResult.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable result %s: %s", path, exc)
        return None
    if result.budget != budget or result.time_budget != time_budget:
        return None
    return result


def _vendor_timings(workload, path: Path) -> list[dict[str, Any]]:
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:
            pass
    timings = []
    for library, layout in vendor_choices(workload):
        try:
            timings.append(time_vendor(workload, library, layout).to_json())
        except (VendorUnavailable, RuntimeError) as exc:
            log.warning("vendor %s %s on %s: %s", library, layout, workload.label, exc)
            timings.append({"library": library, "layout": layout, "gflops": None, "error": str(exc)[:500]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(timings, indent=1))
    return timings


def compare(env_ids: Sequence[str], agents: str | Sequence[str] = DEFAULT_AGENTS, budget: int | None = 128,
            seeds: int | Sequence[int] = 3, db: str | Path | None = None,
            time_points: Sequence[float] = DEFAULT_TIME_POINTS, trial_points: Sequence[int] = DEFAULT_TRIAL_POINTS,
            out_dir: str | Path = "compare-results", *, time_budget: float | None = None,
            agent_options: Mapping[str, Mapping[str, Any]] | None = None, vendor: bool = True, plot: bool = True,
            progress: bool = True, remeasure: int = 3, shape: Mapping[str, Any] | None = None,
            space: str | None = None, dtype: str = "float32") -> Leaderboard:
    """Run every agent on every env with the same budget, one at a time, into one database.

    Args:
        env_ids: registered env ids (``tensorgym list``).
        agents: agent names (a list, or comma-separated), built with ``make_agent``.
        budget: measurements per run; time_budget: seconds of tuning clock per run (optional).
        seeds: a number of seeds (0..n-1) or the seeds themselves.
        db: the tensorgym database every run measures into (created if missing; default:
            :func:`tensorgym.database.default_path`).
        time_points, trial_points: where the table reads the best-so-far curves.
        out_dir: where results, tables and plots go; also the resume cache.
        agent_options: keyword arguments per agent name, for ``make_agent``.
        vendor: time the vendor libraries; plot: write the PNGs.
        remeasure: rounds of re-timing every run's best config and the vendors at the end (0: none).
        progress: progress bars.
        shape: the shape of the parametric ids among ``env_ids`` (``tensorgym/Matmul-v0``
            needs ``{"M": .., "N": .., "K": ..}``); suite layers have theirs.
        space: the space the search agents tune in (default: each agent's own, ``tiles`` for most;
            ``mapping`` when ``dtype`` is not float32). The MetaSchedule peer searches its own space
            whatever this is.
        dtype: the workloads' data type (``"float32"``, ``"int8"``, ``"bf16"``); a non-default one is part
            of the ids the table and the files use (``Conv2d-ResNet18-C7-v0[dtype=int8]``).

    Returns the :class:`Leaderboard` (also written to ``out_dir``).
    """
    env_ids = list(dict.fromkeys(env_ids))
    if not env_ids:
        raise InvalidArgumentError("give at least one env id (see `tensorgym list`)")
    workloads: dict[str, Workload] = {}  # the board's env id -> its workload
    for env_id in env_ids:
        own = shape if env_id in PARAMETRIC_IDS else None
        # A custom shape and a non-default dtype are part of the id the table, the files and the resume cache use.
        parts = [f"{k}={v}" for k, v in (own or {}).items()] + ([f"dtype={dtype}"] if dtype != "float32" else [])
        shown = f"{env_id}[{','.join(parts)}]" if parts else env_id
        workloads[shown] = workload_of(env_id, own).with_dtype(dtype)
    env_ids = list(workloads)
    default_space = space or ("mapping" if dtype != "float32" else None)

    def space_of_agent(agent) -> str:
        return default_space if default_space is not None else agent.env_space

    names = _parse_agents(agents)
    seed_list = _parse_seeds(seeds)
    options = {name: dict((agent_options or {}).get(name, {})) for name in names}
    built = {name: make_agent(name, **options[name]) for name in names}  # fails early on unknown names
    for agent in built.values():
        agent.check_space(space_of_agent(agent))  # fails early on an agent that cannot tune in the space
    check_budget(budget, time_budget)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    board = Leaderboard(env_ids=env_ids, agents=names, seeds=seed_list, budget=budget, time_budget=time_budget,
                        trial_points=tuple(int(p) for p in trial_points),
                        time_points=tuple(float(t) for t in time_points))
    runs = [(e, s, a) for e in env_ids for s in seed_list for a in names]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), desc="compare", unit="run", position=0, dynamic_ncols=True)
    database = Database(db if db is not None else default_path())
    measurer = Measurer()
    envs_open: dict[tuple[str, str], TuningEnv] = {}

    def env_for(env_id: str, space: str) -> TuningEnv:
        if (env_id, space) not in envs_open:
            envs_open[(env_id, space)] = make_env(workloads[env_id], space=space, db=database, measurer=measurer)
        return envs_open[(env_id, space)]

    try:
        for env_id, workload in workloads.items():
            board.labels[env_id] = workload.label
            if vendor:
                board.vendor[env_id] = _vendor_timings(workload, out / "vendor" / f"{slug(env_id)}.json")
        for env_id, seed, name in runs:
            agent = built[name]
            # A space other than the agent's own is part of the run's identity (and of its file name).
            path = _result_path(out, env_id, name, seed, {**options[name], **({"space": space} if space else {})})
            result = _load_result(path, budget, time_budget)
            if result is None:
                if bar is not None:
                    bar.set_postfix_str(f"{env_id} {name} seed {seed}")
                log.info("compare: %s, agent %s, seed %d", env_id, name, seed)
                t0 = time.monotonic()
                try:
                    result = agent.tune(env_for(env_id, space_of_agent(agent)), budget=budget, time_budget=time_budget,
                                        seed=seed, callback=ProgressBarCallback() if progress else None)
                except Exception as exc:  # noqa: BLE001 - one failed agent must not end the comparison
                    log.exception("compare: %s on %s (seed %d) failed", name, env_id, seed)
                    board.errors.append({"env": env_id, "agent": name, "seed": seed,
                                         "error": f"{type(exc).__name__}: {exc}"[:2000],
                                         "seconds": time.monotonic() - t0})
                    if bar is not None:
                        bar.update(1)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                result.save(path)
            board.results.setdefault((env_id, name), []).append(result)
            board.result_files.setdefault((env_id, name), []).append(str(path))
            if bar is not None:
                bar.update(1)
        if remeasure > 0:
            _remeasure_winners(board, workloads, remeasure, env_for, measurer, out, progress,
                               default_space or "tiles")
    finally:
        if bar is not None:
            bar.close()
        for env in envs_open.values():
            env.close()
        measurer.close()
        database.close()
    write_tables(board, out)
    if plot:
        plot_curves(board, out)
    return board


def retime_interleaved(measurer, kernels: Sequence[tuple[Any, Any]], vendors: Sequence[tuple[Any, str, str]],
                       rounds: int, label: str = "re-timing", progress: bool = False
                       ) -> tuple[list[list[float]], list[list[float]]]:
    """Time kernels ``(space, config)`` and vendor references ``(workload, backend, layout)`` again.

    ``rounds`` rounds, each timing every kernel then every vendor once, so that
    a slow minute of the machine hits all of them alike. Returns the GFLOP/s of
    each kernel and each vendor, one value per round (failed ones left out).
    """
    kernel_values: list[list[float]] = [[] for _ in kernels]
    vendor_values: list[list[float]] = [[] for _ in vendors]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=rounds * (len(kernels) + len(vendors)), desc=label, unit="kernel", dynamic_ncols=True)
    for _ in range(rounds):
        for values, (space, config) in zip(kernel_values, kernels):
            record = measurer.measure(space, [config], check=False)[0]
            if record.ok:
                values.append(record.gflops)
            if bar is not None:
                bar.update(1)
        for values, (workload, backend, layout) in zip(vendor_values, vendors):
            try:
                values.append(time_vendor(workload, backend, layout).gflops)
            except RuntimeError as exc:
                log.warning("re-timing %s %s on %s: %s", backend, layout, workload.label, exc)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return kernel_values, vendor_values


def _remeasure_winners(board: Leaderboard, workloads: Mapping[str, Any], rounds: int, env_for, measurer, out: Path,
                       progress: bool, env_space: str = "tiles") -> None:
    """Re-time every run's best config and the vendors (:func:`retime_interleaved`), per env."""

    for env_id in board.env_ids:
        runs = [(name, i, r) for name in board.agents for i, r in enumerate(board.results.get((env_id, name), []))
                if r.best_config is not None and len(r.extra.get("remeasured_samples", ())) < rounds]
        refs = [ref for ref in board.vendor.get(env_id, []) if ref.get("gflops") is not None and "backend" in ref
                and len(ref.get("remeasured_samples", ())) < rounds]
        if not runs and not refs:
            continue
        spaces = {r.space: _space_for(env_for, env_id, r.space, env_space) for _, _, r in runs}
        workload = workloads[env_id]
        kernel_values, vendor_values = retime_interleaved(
            measurer, [(spaces[r.space], r.best_config) for _, _, r in runs],
            [(workload, ref["backend"], ref["layout"]) for ref in refs], rounds, f"re-timing {env_id}", progress)
        for (name, i, result), values in zip(runs, kernel_values):
            result.extra["remeasured_samples"] = values
            result.extra["remeasured_gflops"] = median_or_none(values)
            result.save(board.result_files[(env_id, name)][i])
        for ref, values in zip(refs, vendor_values):
            ref["remeasured_samples"] = values
            ref["remeasured_gflops"] = median_or_none(values)
        if refs:
            path = out / "vendor" / f"{slug(env_id)}.json"
            path.write_text(json.dumps(board.vendor[env_id], indent=1))


def _space_for(env_for, env_id: str, space: str, env_space: str = "tiles") -> Space:
    """The space object to re-time a result of ``space`` on ``env_id``: the env's own where one exists
    (results of spaces without an env, MetaSchedule's, are re-timed through an ``env_space`` env)."""
    return space_of(env_for(env_id, space if space in ENVS else env_space), space)


def space_of(env, space: str) -> Space:
    """The space named ``space`` over ``env``'s workload: the env's own if it is that space."""
    env = tuning_env(env)
    return env.search_space if env.search_space.name == space else make_space(space, env.workload, env.target)


def median_or_none(values: Sequence[float]) -> float | None:
    """The median of re-timed values, None when every round failed."""
    return float(np.median(values)) if values else None


