"""The ``compare`` run: every agent on every env, same budget, same machine, one database; a table and plots.

:func:`compare` runs each (env, seed, agent) in turn, in one process, never
two measurements at once, all into one tensorgym database, and times the
vendor library once per env (conv2d: PyTorch/oneDNN NCHW and NHWC; matmul:
NumPy and PyTorch). Agents are built by name through
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

import argparse
import csv
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..text import format_table, slug
from ..tuner import TuningResult, check_budget

log = logging.getLogger(__name__)

DEFAULT_AGENTS = ("random", "ga", "dgd", "optuna", "metaschedule")
DEFAULT_TRIAL_POINTS = (16, 32, 64, 128)
DEFAULT_TIME_POINTS = (60.0, 120.0)
REACH_FRACTION = 0.95


# -- statistics --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stat:
    """Mean and range of one metric over seeds (``values`` may hold None: not reached)."""

    values: tuple[float | None, ...]

    @property
    def known(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.known)) if self.known else None

    @property
    def min(self) -> float | None:
        return min(self.known) if self.known else None

    @property
    def max(self) -> float | None:
        return max(self.known) if self.known else None

    def format(self, digits: int = 1) -> str:
        if not self.known:
            return "-"
        text = f"{self.mean:.{digits}f}"
        if len(self.values) > 1:
            text += f" ({self.min:.{digits}f}-{self.max:.{digits}f})"
        if len(self.known) < len(self.values):
            text += f" [{len(self.known)}/{len(self.values)}]"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.min, "max": self.max, "values": list(self.values)}


def trials_to_fraction(result: TuningResult, fraction: float = REACH_FRACTION) -> int | None:
    """Measurements the run needed to reach ``fraction`` of its own final best-so-far.

    The same as :meth:`TuningResult.trials_to_reach` for tensorgym's agents;
    for the MetaSchedule peer, whose ``best_gflops`` is a re-timing, it reads
    the timeline alone.
    """
    if not result.trials:
        return None
    final = result.trials[-1].best_gflops
    for trial in result.trials:
        if trial.best_gflops >= fraction * final > 0:
            return trial.index
    return None


# -- the leaderboard --------------------------------------------------------------------------------------------
@dataclass
class Leaderboard:
    """The results of a :func:`compare` run and the table made of them."""

    env_ids: list[str]
    agents: list[str]
    seeds: list[int]
    budget: int | None
    time_budget: float | None = None
    trial_points: tuple[int, ...] = DEFAULT_TRIAL_POINTS
    time_points: tuple[float, ...] = DEFAULT_TIME_POINTS
    results: dict[tuple[str, str], list[TuningResult]] = field(default_factory=dict)
    result_files: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    vendor: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # env id -> workload label

    @property
    def points(self) -> tuple[int, ...]:
        """The trial points that fit the budget."""
        if self.budget is None:
            return tuple(self.trial_points)
        fitting = tuple(p for p in self.trial_points if p <= self.budget)
        return fitting or (self.budget,)

    def metric_names(self) -> list[str]:
        return ([f"@{p}" for p in self.points] + [f"@{_seconds(t)}" for t in self.time_points]
                + ["final", "re-timed", f"to{round(REACH_FRACTION * 100)}%"])

    def stats(self, env_id: str, agent: str) -> dict[str, Stat]:
        runs = self.results.get((env_id, agent), [])
        out = {f"@{p}": Stat(tuple(r.best_at(trials=p) for r in runs)) for p in self.points}
        out.update({f"@{_seconds(t)}": Stat(tuple(r.best_at(seconds=t) for r in runs)) for t in self.time_points})
        out["final"] = Stat(tuple(r.best_gflops for r in runs))
        out["re-timed"] = Stat(tuple(r.extra.get("remeasured_gflops") for r in runs))
        out[f"to{round(REACH_FRACTION * 100)}%"] = Stat(tuple(
            None if (n := trials_to_fraction(r)) is None else float(n) for r in runs))
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per env x agent, then one per vendor reference: the table as data."""
        out = []
        for env_id in self.env_ids:
            for agent in self.agents:
                runs = self.results.get((env_id, agent), [])
                out.append({"env": env_id, "workload": self.labels.get(env_id, ""), "agent": agent,
                            "seeds": [r.seed for r in runs], "stats": self.stats(env_id, agent)})
            for ref in self.vendor.get(env_id, []):
                if ref.get("gflops") is not None:
                    out.append({"env": env_id, "workload": self.labels.get(env_id, ""),
                                "agent": f"vendor: {ref['library']} {ref['layout']}", "seeds": [],
                                "stats": {"final": Stat((ref["gflops"],)),
                                          "re-timed": Stat((ref.get("remeasured_gflops"),))}})
        return out

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        names = self.metric_names()
        header = ["env", "agent", "n"] + names
        cells = []
        for row in self.rows():
            stats = row["stats"]
            digits = {n: 0 if n.startswith("to") else 1 for n in names}
            cells.append([row["env"], row["agent"], str(len(row["seeds"])) if row["seeds"] else ""]
                         + [stats[n].format(digits[n]) if n in stats else "" for n in names])
        return header, cells

    def table(self) -> str:
        """The table as aligned text (GFLOP/s; ``to95%`` in measurements)."""
        header, cells = self._cells()
        return format_table(cells, header)

    def markdown(self) -> str:
        header, cells = self._cells()
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(c or " " for c in row) + " |" for row in cells]
        note = f"\n{self.caption()}"
        return "\n".join(lines) + "\n" + note + "\n"

    def caption(self) -> str:
        return (f"Best GFLOP/s after N measurements (@N) and after T seconds of tuning clock (@Ts), final best, "
                f"the final best config re-timed at the end in rounds interleaved with the other runs' and the "
                f"vendors' (re-timed), and measurements to reach {round(REACH_FRACTION * 100)} % of the run's "
                f"final best; mean (min-max) over seeds {self.seeds}, budget {self.budget}.")

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": {"env_ids": self.env_ids, "agents": self.agents, "seeds": self.seeds, "budget": self.budget,
                         "time_budget": self.time_budget, "trial_points": list(self.points),
                         "time_points": list(self.time_points)},
            "rows": [{**r, "stats": {k: s.to_json() for k, s in r["stats"].items()}} for r in self.rows()],
            "vendor": self.vendor, "errors": self.errors,
            "result_files": {f"{e}/{a}": files for (e, a), files in self.result_files.items()},
        }

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """Write compare.csv, compare.json and compare.md; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"csv": out / "compare.csv", "json": out / "compare.json", "md": out / "compare.md"}
        with paths["csv"].open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"])
            for row in self.rows():
                for metric, stat in row["stats"].items():
                    writer.writerow([row["env"], row["workload"], row["agent"], metric, _num(stat.mean),
                                     _num(stat.min), _num(stat.max), len(stat.values), json.dumps(list(stat.values))])
        paths["json"].write_text(json.dumps(self.to_json(), indent=1))
        paths["md"].write_text(self.markdown())
        return paths

    # -- plots ---------------------------------------------------------------------------------------------------
    def plot(self, out_dir: str | Path) -> list[Path]:
        """One PNG per env: best-so-far vs measurements and vs seconds; returns the paths."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        out = Path(out_dir) / "plots"
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for env_id in self.env_ids:
            fig = Figure(figsize=(12, 4.6), layout="constrained")
            FigureCanvasAgg(fig)
            by_trials, by_time = fig.subplots(1, 2)
            horizon = max((t.elapsed_s for a in self.agents for r in self.results.get((env_id, a), [])
                           for t in r.trials), default=1.0)
            grid = np.linspace(0.0, horizon, 400)
            for i, agent in enumerate(self.agents):
                runs = [r for r in self.results.get((env_id, agent), []) if r.trials]
                if not runs:
                    continue
                color = f"C{i % 10}"
                n = max(len(r.trials) for r in runs)
                xs = np.arange(1, n + 1)
                curves = np.array([[r.best_at(trials=int(x)) for x in xs] for r in runs])
                _band(by_trials, xs, curves, color, f"{agent} (n={len(runs)})")
                curves = np.array([[r.best_at(seconds=float(t)) for t in grid] for r in runs])
                _band(by_time, grid, curves, color, agent)
                # Where the runs ended (mean over seeds): the curve is flat after it because the run was over.
                by_time.plot(np.mean([r.trials[-1].elapsed_s for r in runs]),
                             np.mean([r.trials[-1].best_gflops for r in runs]), marker="o", color=color)
            for j, ref in enumerate(r for r in self.vendor.get(env_id, []) if r.get("gflops")):
                for ax in (by_trials, by_time):
                    ax.axhline(ref["gflops"], color="0.3", linestyle=("--", ":", "-.")[j % 3], linewidth=1.2,
                               label=f"{ref['library']} {ref['layout']}")
            title = f"{env_id}" + (f" ({self.labels[env_id]})" if self.labels.get(env_id) else "")
            by_trials.set(xlabel="measurements", ylabel="best GFLOP/s so far", title=title)
            by_time.set(xlabel="tuning clock (s)", ylabel="best GFLOP/s so far", title=title)
            for ax in (by_trials, by_time):
                ax.grid(alpha=0.3)
                ax.set_ylim(bottom=0)
            by_trials.legend(fontsize=8, loc="lower right")
            path = out / f"{slug(env_id)}.png"
            fig.savefig(path, dpi=110)
            paths.append(path)
        return paths


def _band(ax, xs: np.ndarray, curves: np.ndarray, color: str, label: str) -> None:
    ax.plot(xs, curves.mean(axis=0), color=color, label=label, linewidth=1.6, drawstyle="steps-post")
    if len(curves) > 1:
        ax.fill_between(xs, curves.min(axis=0), curves.max(axis=0), color=color, alpha=0.18, step="post")


def _seconds(t: float) -> str:
    return f"{t:g}s"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# -- running ----------------------------------------------------------------------------------------------------
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
    from .vendor import VendorUnavailable, time_vendor, vendor_choices

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
            seeds: int | Sequence[int] = 3, db: str | Path = "tensorgym.db",
            time_points: Sequence[float] = DEFAULT_TIME_POINTS, trial_points: Sequence[int] = DEFAULT_TRIAL_POINTS,
            out_dir: str | Path = "compare-results", *, time_budget: float | None = None,
            agent_options: Mapping[str, Mapping[str, Any]] | None = None, vendor: bool = True, plot: bool = True,
            progress: bool = True, remeasure: int = 3, shape: Mapping[str, Any] | None = None) -> Leaderboard:
    """Run every agent on every env with the same budget, one at a time, into one database.

    Args:
        env_ids: registered env ids (``tensorgym list``).
        agents: agent names (a list, or comma-separated), built with ``make_agent``.
        budget: measurements per run; time_budget: seconds of tuning clock per run (optional).
        seeds: a number of seeds (0..n-1) or the seeds themselves.
        db: the tensorgym database every run measures into (created if missing).
        time_points, trial_points: where the table reads the best-so-far curves.
        out_dir: where results, tables and plots go; also the resume cache.
        agent_options: keyword arguments per agent name, for ``make_agent``.
        vendor: time the vendor libraries; plot: write the PNGs.
        remeasure: rounds of re-timing every run's best config and the vendors at the end (0: none).
        progress: progress bars.
        shape: the shape of the parametric ids among ``env_ids`` (``tensorgym/Matmul-v0``
            needs ``{"M": .., "N": .., "K": ..}``); suite layers have theirs.

    Returns the :class:`Leaderboard` (also written to ``out_dir``).
    """
    import gymnasium as gym

    from ..envs import PARAMETRIC_IDS, shape_kwargs
    from ..agents import make_agent
    from ..agents.base import tuning_env
    from ..database import Database
    from ..measure import Measurer

    env_ids = list(dict.fromkeys(env_ids))
    if not env_ids:
        raise ValueError("give at least one env id (see `tensorgym list`)")
    makers: dict[str, tuple[str, dict[str, Any]]] = {}  # the board's env id -> (gym id, shape kwargs)
    for env_id in env_ids:
        kwargs = shape_kwargs(env_id, shape if env_id in PARAMETRIC_IDS else None)
        # A custom shape is part of the id the table, the files and the resume cache use.
        shown = f"{env_id}[{','.join(f'{k}={v}' for k, v in kwargs.items())}]" if kwargs else env_id
        makers[shown] = (env_id, kwargs)
    env_ids = list(makers)
    names = _parse_agents(agents)
    seed_list = _parse_seeds(seeds)
    options = {name: dict((agent_options or {}).get(name, {})) for name in names}
    built = {name: make_agent(name, **options[name]) for name in names}  # fails early on unknown names
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
    database = Database(db)
    measurer = Measurer()
    envs_open: dict[tuple[str, str], Any] = {}
    workloads: dict[str, Any] = {}  # env id -> its workload

    def env_for(env_id: str, space: str):
        if (env_id, space) not in envs_open:
            gym_id, kwargs = makers[env_id]
            envs_open[(env_id, space)] = gym.make(gym_id, space=space, db=database, measurer=measurer, **kwargs)
        return envs_open[(env_id, space)]

    try:
        for env_id in env_ids:
            workload = workloads[env_id] = tuning_env(env_for(env_id, built[names[0]].spaces[0])).workload
            board.labels[env_id] = workload.label
            if vendor:
                board.vendor[env_id] = _vendor_timings(workload, out / "vendor" / f"{slug(env_id)}.json")
        for env_id, seed, name in runs:
            agent = built[name]
            path = _result_path(out, env_id, name, seed, options[name])
            result = _load_result(path, budget, time_budget)
            if result is None:
                if bar is not None:
                    bar.set_postfix_str(f"{env_id} {name} seed {seed}")
                log.info("compare: %s, agent %s, seed %d", env_id, name, seed)
                t0 = time.monotonic()
                try:
                    result = agent.tune(env_for(env_id, agent.spaces[0]), budget=budget, time_budget=time_budget,
                                        seed=seed, progress=progress)
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
            _remeasure_winners(board, workloads, remeasure, env_for, measurer, out, progress)
    finally:
        if bar is not None:
            bar.close()
        for env in envs_open.values():
            env.close()
        measurer.close()
        database.close()
    board.write(out)
    if plot:
        board.plot(out)
    return board


def retime_interleaved(measurer, kernels: Sequence[tuple[Any, Any]], vendors: Sequence[tuple[Any, str, str]],
                       rounds: int, label: str = "re-timing", progress: bool = False
                       ) -> tuple[list[list[float]], list[list[float]]]:
    """Time kernels ``(space, config)`` and vendor references ``(workload, backend, layout)`` again.

    ``rounds`` rounds, each timing every kernel then every vendor once, so that
    a slow minute of the machine hits all of them alike. Returns the GFLOP/s of
    each kernel and each vendor, one value per round (failed ones left out).
    """
    from .vendor import time_vendor

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
                       progress: bool) -> None:
    """Re-time every run's best config and the vendors (:func:`retime_interleaved`), per env."""

    for env_id in board.env_ids:
        runs = [(name, i, r) for name in board.agents for i, r in enumerate(board.results.get((env_id, name), []))
                if r.best_config is not None and len(r.extra.get("remeasured_samples", ())) < rounds]
        refs = [ref for ref in board.vendor.get(env_id, []) if ref.get("gflops") is not None and "backend" in ref
                and len(ref.get("remeasured_samples", ())) < rounds]
        if not runs and not refs:
            continue
        spaces = {r.space: _space_for(env_for, env_id, r.space) for _, _, r in runs}
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


def _space_for(env_for, env_id: str, space: str):
    """The space object to re-time a result of ``space`` on ``env_id``: the env's own where one exists."""
    from ..envs import ENV_CLASSES

    return space_of(env_for(env_id, space if space in ENV_CLASSES else "tiles"), space)


def space_of(env, space: str):
    """The space named ``space`` over ``env``'s workload: the env's own if it is that space."""
    from ..agents.base import tuning_env
    from ..spaces import make_space

    env = tuning_env(env)
    return env.search_space if env.search_space.name == space else make_space(space, env.workload, env.target)


def median_or_none(values: Sequence[float]) -> float | None:
    """The median of re-timed values, None when every round failed."""
    return float(np.median(values)) if values else None


# -- command line -----------------------------------------------------------------------------------------------
def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _seeds_arg(text: str) -> int | tuple[int, ...]:
    values = _ints(text)
    if "," in text:
        return values
    if len(values) != 1 or values[0] < 1:
        raise argparse.ArgumentTypeError(f"--seeds is a count (3) or a list (0,1,2), got {text!r}")
    return values[0]


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    """Define ``tensorgym compare`` on the CLI's subparsers; returns the parser."""
    p = subparsers.add_parser("compare", help="run several agents on several envs and tabulate them",
                              description="Run every agent on every env with the same measurement budget, one "
                                          "after the other, into one database; print the table and write "
                                          "CSV/JSON/Markdown and PNG plots. Re-running resumes.")
    p.add_argument("env_ids", nargs="+", metavar="ENV_ID", help="e.g. Conv2d-ResNet-R5-v0 Matmul-BERT-M3-v0")
    p.add_argument("--shape", help="shape of the parametric ids tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, "
                                   "e.g. M=512,N=768,K=3072")
    p.add_argument("--agents", default=",".join(DEFAULT_AGENTS),
                   help=f"comma-separated agent names (default: {','.join(DEFAULT_AGENTS)})")
    p.add_argument("--budget", type=int, default=128, help="measurements per run (default: 128)")
    p.add_argument("--time-budget", type=float, default=None, help="seconds of tuning clock per run (default: none)")
    p.add_argument("--seeds", type=_seeds_arg, default=3, help="number of seeds, or a list like 0,1,2 (default: 3)")
    p.add_argument("--db", default="tensorgym.db", help="SQLite database all runs share (default: tensorgym.db)")
    p.add_argument("--out", default="compare-results", help="output directory (default: compare-results)")
    p.add_argument("--trial-points", type=_ints, default=DEFAULT_TRIAL_POINTS,
                   help="measurement counts the table reads (default: 16,32,64,128)")
    p.add_argument("--time-points", type=_floats, default=DEFAULT_TIME_POINTS,
                   help="seconds of tuning clock the table reads (default: 60,120)")
    p.add_argument("--no-vendor", action="store_true", help="skip timing the vendor libraries")
    p.add_argument("--remeasure", type=int, default=3,
                   help="rounds of re-timing every run's best config and the vendors at the end (default: 3)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_compare)
    return p


def cmd_compare(args: argparse.Namespace) -> int:
    from ..envs import parse_shape

    try:
        shape = parse_shape(args.shape) if args.shape else None
        board = compare(args.env_ids, args.agents, budget=args.budget, seeds=args.seeds, db=args.db,
                        time_points=args.time_points, trial_points=args.trial_points, out_dir=args.out,
                        time_budget=args.time_budget, vendor=not args.no_vendor, plot=not args.no_plot,
                        progress=not args.quiet, remeasure=args.remeasure, shape=shape)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    print()
    print(board.table())
    print(f"\n{board.caption()}")
    for error in board.errors:
        print(f"FAILED: {error['agent']} on {error['env']} (seed {error['seed']}): {error['error'].splitlines()[0]}")
    print(f"written to {Path(args.out).resolve()} (compare.csv, compare.json, compare.md, results/, plots/)")
    return 1 if board.errors else 0
