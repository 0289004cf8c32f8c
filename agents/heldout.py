"""Leave-one-layer-out on landscapes: what a learning agent trains on for a held-out layer, and seeded runs.

A learning agent (the one-shot predictor, an RL policy) claims to tune a layer it never saw. On
shipped landscapes that claim is checked without measuring anything: for each landscape in turn,
the agent trains on the *other* landscapes (:func:`leave_one_layer_out`, which never hands back
the held-out layer, by workload key, so a second copy of it cannot slip in either) and then tunes
the held-out one through the landscape backend, seed after seed (:func:`landscape_runs`), next to
the baselines run the same way. Each run's result carries its simulated tuning clock: the
landscape's recorded build and run seconds as the live pipeline charges them, plus the agent's own
computing time (the Tuner times it), so a search that thinks long pays for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tensorgym.envs.registration import make_env
from tensorgym.errors import InvalidArgumentError
from tensorgym.landscape import Landscape


def leave_one_layer_out(landscapes: Sequence[Landscape], held_out: Landscape) -> list[Landscape]:
    """The landscapes to train on when ``held_out``'s layer is the test: every one of another layer."""
    if not any(land.workload_key == held_out.workload_key for land in landscapes):
        raise InvalidArgumentError(f"{held_out.workload_label} is not among the {len(landscapes)} landscapes")
    training = [land for land in landscapes if land.workload_key != held_out.workload_key]
    if not training:
        raise InvalidArgumentError(f"holding out {held_out.workload_label} leaves no landscape to train on")
    return training


def landscape_runs(agent: Any, landscape: Landscape, *, budget: int, seeds: Iterable[int],
                   trial_points: Sequence[int] = ()) -> list[dict[str, Any]]:
    """``agent`` tuning ``landscape``'s layer once per seed through the landscape backend (the draws of each run
    follow its seed); one dict per run: ``seed``, ``best_gflops``, ``fraction_of_optimum``, ``clock_s`` (the
    simulated tuning clock at the run's last trial), ``trials``, and ``best_at`` (the best after each of
    ``trial_points`` trials, with the clock then: a shorter run of the same seed is a prefix of it)."""
    optimum = float(landscape.scores.max())
    env = make_env(landscape.workload, space="tiles", backend="landscape", landscape=landscape)
    out = []
    try:
        for seed in seeds:
            result = agent.tune(env, budget=budget, seed=int(seed))
            best = float(result.best_gflops or 0.0)
            trials = result.trials
            out.append({"seed": int(seed), "best_gflops": best, "fraction_of_optimum": best / optimum,
                        "clock_s": float(trials[-1].elapsed_s) if trials else 0.0, "trials": len(trials),
                        "best_at": {str(n): [float(result.best_at(trials=n) or 0.0),
                                             float(trials[min(n, len(trials)) - 1].elapsed_s) if trials else 0.0]
                                    for n in trial_points}})
    finally:
        env.close()
    return out
