"""The ``compare-network`` run: several task schedulers on one network, same budget, one database; table and plot.

:func:`compare_network` runs each (seed, scheduler) in turn in one process,
never two measurements at once, all through one network env (one database,
one measurer), then times PyTorch's weighted sum over the same layers
(:mod:`.network_vendor`). Schedulers are built by name
(:func:`tensorgym.catalog.make_scheduler`): ``round-robin``, ``gradient``,
``metaschedule-gradient``, ``dual-task`` and the ``metaschedule`` peer.

Because the runs share the database and the search inside a (task,
candidate) is seeded by the run's seed, schedulers of the same seed start
with the same warm-up trials and often meet the same configs later: the
database answers them, charged one trial and the wall seconds they took
when first measured, so every run's clock reads as if it had measured alone.

**Outputs** in ``out_dir``: ``compare_network.csv`` / ``.json`` / ``.md``
(the :class:`~tensorgym.baselines.network_board.NetworkBoard`),
``results/<scheduler>-seed<N>.json`` (every
:class:`~tensorgym.network_result.NetworkResult`), ``vendor.json`` and
``compare_network.png`` (network latency vs trials and vs seconds).

**Resume.** A finished run's result file is reused when its settings match;
an interrupted run is redone, cheaply, because the database answers every
measurement it had finished. The vendor timings are reused too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tensorgym.catalog import make_scheduler
from tensorgym.database import default_path
from tensorgym.envs.network_env import NetworkEnv
from tensorgym.network_result import NetworkResult
from tensorgym.network_tuning import NetworkProgressBar
from tensorgym.networks import Network, resolve_network
from tensorgym.text import slug
from tensorgym.tuner import check_budget

from .compare import _cached_vendor, _digest, _noting_failure, _parse_names, _parse_seeds, _read_saved
from .network_board import NetworkBoard
from .network_render import plot, write_tables
from .network_vendor import NetworkVendor, time_network_vendor

log = logging.getLogger(__name__)

DEFAULT_SCHEDULERS = ("round-robin", "gradient", "dual-task")


def compare_network(network: "str | Path | Network", schedulers: str | Sequence[str] = DEFAULT_SCHEDULERS,
                    budget: int | None = 1200, seeds: int | Sequence[int] = 3, db: str | Path | None = None, *,
                    space: str = "tiles", dtype: str | None = None, time_budget: float | None = None,
                    measure_per_round: int | None = None, agent: str | None = None,
                    agent_options: Mapping[str, Any] | None = None,
                    scheduler_options: Mapping[str, Mapping[str, Any]] | None = None,
                    out_dir: str | Path = "compare-network-results", trial_points: Sequence[int] | None = None,
                    time_points: Sequence[float] | None = None, vendor: bool = True, make_plot: bool = True,
                    progress: bool = True) -> NetworkBoard:
    """Run every scheduler on ``network`` with the same budget, one run at a time, into one database.

    Args:
        network: a built-in network's name, a JSON/TOML file, or a :class:`~tensorgym.networks.Network`.
        schedulers: scheduler names (a list, or comma-separated).
        budget: trials per run over the whole network; time_budget: seconds of tuning clock per run.
        seeds: a number of seeds (0..n-1) or the seeds themselves.
        db: the database every run measures into (default: :func:`tensorgym.database.default_path`).
        space, dtype: the tasks' search space and data type.
        measure_per_round: trials per round (default: Ansor's ``min(64, budget // tasks)``).
        agent, agent_options: the search inside each task (default: the GA where it works).
        scheduler_options: keyword arguments per scheduler name, for ``make_scheduler``.
        out_dir: where results, tables and the plot go; also the resume cache.
        trial_points, time_points: where the table reads the curves (default: fractions of the budget/clock).
        vendor: time PyTorch's weighted sum; make_plot: write the PNG; progress: progress bars.
    """
    net = resolve_network(network)
    names = _parse_names(schedulers, "schedulers")
    seed_list = _parse_seeds(seeds)
    options = {name: dict((scheduler_options or {}).get(name, {})) for name in names}
    built = {name: make_scheduler(name, **options[name]) for name in names}  # fails early on unknown names
    check_budget(budget, time_budget)
    env = NetworkEnv(net, space=space, dtype=dtype, db=db if db is not None else default_path(), agent=agent,
                     agent_options=agent_options)
    settings = {"network": env.network.to_json(), "space": space, "budget": budget, "time_budget": time_budget,
                "measure_per_round": measure_per_round, "agent": env.agent_name,
                "agent_options": dict(agent_options or {})}
    out = Path(out_dir)
    board = NetworkBoard(network=env.network.name, schedulers=names, seeds=seed_list, budget=budget,
                         time_budget=time_budget, space=space, dtype=dtype,
                         trial_points=tuple(int(p) for p in trial_points) if trial_points else None,
                         time_points=tuple(float(t) for t in time_points) if time_points else None)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for seed in seed_list:
            for name in names:
                digest = _digest({**settings, "scheduler": name, "options": options[name], "seed": seed})
                path = out / "results" / f"{slug(name)}-seed{seed}.json"
                result = _read_saved(path, NetworkResult.from_json,  # made with other settings: run again
                                     lambda r, digest=digest: r.extra.get("settings_digest") == digest)
                if result is None:
                    log.info("compare-network: %s, seed %d", name, seed)
                    with _noting_failure(board.errors, {"scheduler": name, "seed": seed}):
                        result = built[name].tune(env, budget=budget, time_budget=time_budget, seed=seed,
                                                  measure_per_round=measure_per_round,
                                                  callback=NetworkProgressBar() if progress else None)
                    if result is None:  # it failed (noted in board.errors)
                        continue
                    result.extra["settings_digest"] = digest
                    path.parent.mkdir(parents=True, exist_ok=True)
                    result.save(path)
                board.results.setdefault(name, []).append(result)
                board.result_files.setdefault(name, []).append(str(path))
        if vendor:
            board.vendor = _vendor(env.network, out / "vendor.json", progress)
    finally:
        env.close()
    write_tables(board, out)
    if make_plot:
        plot(board, out)
    return board


def _vendor(network: Network, path: Path, progress: bool) -> NetworkVendor:
    """PyTorch's timings of ``network``'s layers: the saved ones when they are of the same layers."""
    keys = [t.workload.key for t in network.tasks]
    return NetworkVendor.from_json(_cached_vendor(
        path, lambda: time_network_vendor(network, progress=progress).to_json(),
        lambda data: [layer.get("key") for layer in NetworkVendor.from_json(data).layers] == keys))
