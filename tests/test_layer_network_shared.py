"""A layer is a network of one task: layer runs and network runs share one mechanism where they used to have two:
one tuning loop and its callbacks, list and progress bar; one result type read "after N trials or T seconds" the same
way; result files and their resume, failed runs, vendor timings, one board with its files and plots, and the CLI's
report."""

from __future__ import annotations

import csv
import importlib.util
import json

import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, small_matmul_space

from tensorgym.agents import RandomAgent
from tensorgym.baselines import vendor as vendor_module
from tensorgym.baselines.board import Leaderboard
from tensorgym.baselines.compare import _cached_vendor, _noting_failure, _parse_names, _read_saved, _tuned, compare
from tensorgym.baselines.render import plot_curves, task_table, write_tables
from tensorgym.baselines.vendor import VendorUnavailable, time_network_references, time_references
from tensorgym.cli.compare import report
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.networks import Network, NetworkTask
from tensorgym.result import last_within
from tensorgym.tuner import (CallbackList, ProgressBarCallback, RoundLog, TaskResult, Trial, Tuner, TuningCallback,
                             TuningResult, as_callback)
from tensorgym.workloads import Matmul


# -- one loop, one kind of callback ---------------------------------------------------------------------------
class _Log(TuningCallback):
    def __init__(self, seen: list):
        self.seen = seen

    def on_start(self, label, budget):
        self.seen.append(("start", label, budget))

    def on_trial(self, trial):
        self.seen.append(("trial", trial.index))

    def on_round(self, log_entry):
        self.seen.append(("round", log_entry.index))

    def on_end(self):
        self.seen.append(("end",))


def _network_trial(index: int, estimate_s: float | None = 2e-3, elapsed_s: float | None = None) -> Trial:
    return Trial(index, index if elapsed_s is None else elapsed_s, None, "ok", 10.0, 1.0 / estimate_s if estimate_s
                 else 0.0, True, task=index % 2, latency_s=1e-3, best_latency_s=estimate_s)


def test_one_callback_list_calls_every_hook_in_order_rounds_included():
    seen: list = []
    callbacks = as_callback([_Log(seen), _Log(seen)])
    assert isinstance(callbacks, CallbackList)
    callbacks.on_start("net", 8)
    callbacks.on_trial(_network_trial(1))
    callbacks.on_round(RoundLog(1, 0, (0,), 1, 1.0, 2e-3))
    callbacks.on_end()
    assert seen == [("start", "net", 8)] * 2 + [("trial", 1)] * 2 + [("round", 1)] * 2 + [("end",)] * 2


def test_a_layer_run_is_one_round_of_its_one_task_and_calls_the_same_hooks():
    seen: list = []
    space = small_matmul_space()
    tuner = Tuner(SyntheticEvaluator(space, peak_at(space, space.sample(np.random.default_rng(1)))), budget=6,
                  callback=_Log(seen), label="layer")
    tuner.run(RandomAgent(batch_size=4), seed=0)
    result = tuner.result("random")
    assert seen == [("start", "layer", 6)] + [("trial", i) for i in range(1, 7)] + [("round", 1), ("end",)]
    assert [(r.task, r.candidates, r.trials) for r in result.rounds] == [(0, (0,), 6)]
    task = result.tasks[0]
    assert (task.label, task.weight, task.candidates, task.trials) == (space.workload.label, 1.0, ["all"], 6)
    assert task.best_latency_s == result.best_latency_s == result.trials[-1].best_latency_s
    assert result.best_gflops == result.trials[-1].best_gflops and result.search == "random"


def test_every_callback_takes_every_run_and_odd_ones_are_refused():
    TuningCallback().on_round(RoundLog(1, 0, (0,), 1, 1.0, None))  # a no-op unless overridden
    assert isinstance(as_callback([TuningCallback()]), CallbackList)
    with pytest.raises(InvalidTypeError, match="TuningCallback"):
        as_callback("progress")
    assert type(as_callback(None)) is TuningCallback


def test_one_progress_bar_shows_the_best_so_far_of_both_runs(monkeypatch):
    shown: list[str] = []

    class _Bar:
        def __init__(self, **kwargs):
            self.total = kwargs["total"]

        def update(self, n):
            pass

        def set_postfix_str(self, text, refresh):
            shown.append(text)

        def close(self):
            shown.append("closed")

    monkeypatch.setattr("tqdm.auto.tqdm", _Bar)
    layer = ProgressBarCallback()
    layer.on_start("w", 4)
    layer.on_trial(Trial(1, 0.1, None, "ok", 12.0, 12.34, True))
    layer.on_end()
    network = ProgressBarCallback()
    network.on_start("net", 4)
    network.on_trial(_network_trial(1, 2.5e-3))
    network.on_trial(_network_trial(2, None))
    network.on_round(RoundLog(1, 0, (0,), 2, 2.0, 2.5e-3))
    network.on_end()
    assert shown == ["best 12.3 GFLOP/s", "closed", "best 400.0 GFLOP/s (2.500 ms)", "best -", "closed"]


# -- one result, one timeline reader -----------------------------------------------------------------------------
def _network_result(trials: list[Trial], agent: str = "rr") -> TuningResult:
    return TuningResult(agent, "n", "network-x", "tiles", "t", 0, 3, None, trials, best_gflops=trials[-1].best_gflops,
                        best_latency_s=trials[-1].best_latency_s, search="ga", measure_per_round=1,
                        tasks=[TaskResult("n/a", "a", 2.0, 1.0, ["all"], best_latency_s=2e-4, best_candidate=0),
                               TaskResult("n/b", "b", 1.0, 1.0, ["all"], best_latency_s=1e-4, best_candidate=0)],
                        rounds=[RoundLog(1, 0, (0,), 1, 0.5, None, True)])


def test_a_layer_and_a_network_timeline_are_read_the_same_way():
    layer = TuningResult("a", "w", "w", "tiles", "t", 0, 3, None,
                         [Trial(i, 0.5 * i, None, "ok", 10.0 * i, 10.0 * i, True, latency_s=1.0 / i,
                                best_latency_s=1.0 / i) for i in (1, 2, 3)], None, 30.0)
    network = _network_result([_network_trial(i, 1e-3 / i, 0.5 * i) for i in (1, 2, 3)])
    assert last_within(layer.trials, 2) is layer.trials[1] and last_within(network.trials, seconds=1.4).index == 2
    assert last_within(layer.trials, 0) is None and last_within(layer.trials, seconds=0.1) is None
    assert [layer.best_at(trials=n) for n in (0, 1, 2, 5)] == [0.0, 10.0, 20.0, 30.0]
    assert [network.latency_at(trials=n) for n in (0, 1, 3)] == [None, 1e-3, 1e-3 / 3]
    assert layer.best_at(trials=3, seconds=1.0) == 20.0 and network.latency_at(trials=3, seconds=1.0) == 5e-4
    assert layer.latency_at(trials=2) == 0.5 and network.best_at(trials=2) == pytest.approx(2000.0)
    # Trials to reach another run's final throughput: the same question of a layer and of a network.
    assert network.trials_to_reach(1.0, network.trials[1].best_gflops) == 2 and layer.trials_to_reach(0.5) == 2
    assert network.share(0) == pytest.approx(4e-4 / network.best_latency_s)


# -- the compare path --------------------------------------------------------------------------------------------
def test_names_are_parsed_the_same_for_agents_and_schedulers():
    assert _parse_names("random, ga") == ["random", "ga"]
    assert _parse_names(["gradient"], "schedulers") == ["gradient"]
    with pytest.raises(InvalidArgumentError, match="schedulers must be distinct"):
        _parse_names("gradient,gradient", "schedulers")
    with pytest.raises(InvalidTypeError, match="schedulers is a list of scheduler names"):
        _parse_names(3, "schedulers")


def test_one_compare_takes_layers_or_networks_but_not_both(tmp_path):
    tuned = _tuned(["Network-ResNet18-v0"], None, "int8")
    assert list(tuned) == ["Network-ResNet18-v0[dtype=int8]"]
    assert {t.workload.dtype for t in tuned["Network-ResNet18-v0[dtype=int8]"].tasks} == {"int8"}
    with pytest.raises(InvalidArgumentError, match="layers or networks, not both"):
        compare(["Network-ResNet18-v0", "Conv2d-ResNet18-C4-v0"], "round-robin", db=tmp_path / "r.db",
                out_dir=tmp_path / "out")
    with pytest.raises(ValueError, match="unknown scheduler"):  # a network's agents are schedulers
        compare(["Network-ResNet18-v0"], "ga", db=tmp_path / "r.db", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.db").exists()


def test_result_files_are_read_back_or_ignored_the_same_way(tmp_path):
    layer = TuningResult("a", "w", "w", "tiles", "t", 0, 3, None, [Trial(1, 0.5, None, "ok", 1.0, 1.0, True)])
    network = _network_result([_network_trial(1)])
    for name, result in (("layer", layer), ("network", network)):
        path = tmp_path / f"{name}.json"
        assert _read_saved(path, TuningResult.from_json) is None  # none yet
        result.save(path)
        assert _read_saved(path, TuningResult.from_json).to_json() == result.to_json()
        path.write_text("{not json")
        assert _read_saved(path, TuningResult.from_json) is None  # unreadable: redone
    old = {k: v for k, v in layer.to_json().items() if k not in ("tasks", "rounds", "search", "measure_per_round")}
    old["trials"] = [{k: v for k, v in t.items() if k in ("index", "elapsed_s", "config", "status", "gflops",
                                                          "best_gflops", "fresh")} for t in old["trials"]]
    assert TuningResult.from_json(old).trials == layer.trials  # a file of an older version still reads


def test_a_failed_run_is_noted_not_raised():
    errors: list[dict] = []
    result = None
    with _noting_failure(errors, {"env": "Network-tiny-v0", "agent": "gradient", "seed": 1}):
        result = 1 / 0
    assert result is None and list(errors[0]) == ["env", "agent", "seed", "error", "seconds"]
    assert errors[0]["error"] == "ZeroDivisionError: division by zero" and errors[0]["seconds"] >= 0
    with pytest.raises(KeyboardInterrupt), _noting_failure(errors, {}):  # an interrupt still ends the comparison
        raise KeyboardInterrupt


def test_vendor_timings_are_cached_until_stale(tmp_path):
    path = tmp_path / "vendor" / "x.json"
    calls: list[int] = []

    def time_them():
        calls.append(1)
        return {"layers": [{"key": "a"}]}

    assert _cached_vendor(path, time_them) == {"layers": [{"key": "a"}]}
    assert _cached_vendor(path, time_them) == {"layers": [{"key": "a"}]} and len(calls) == 1
    stale = {"layers": [{"key": "b"}]}
    assert _cached_vendor(path, lambda: stale, lambda d: d["layers"][0]["key"] == "b") == stale
    assert json.loads(path.read_text()) == stale


def test_a_layer_and_a_network_time_their_references_through_one_path(monkeypatch):
    workload = Matmul(32, 32, 32)

    class _Timed:
        def __init__(self, layout, latency_s):
            self.data = {"library": "torch 2.13.0 MKL", "layout": layout, "backend": "torch", "latency_s": latency_s,
                         "latency_cv": 0.01, "gflops": workload.gflops(latency_s), "max_rel_error": 1e-6}

        def to_json(self):
            return self.data

    def fake_time_vendor(w, library, layout, native_blas=False):
        if library != "torch":
            raise VendorUnavailable(f"{library} is not installed")
        return _Timed(layout, 1e-4)

    monkeypatch.setattr(vendor_module, "time_vendor", fake_time_vendor)
    timings = time_references(workload)  # every reference of a layer: one failure does not stop the others
    assert [t["layout"] for t in timings if "error" not in t] == ["row-major"]
    assert all(t["gflops"] is None and "not installed" in t["error"] for t in timings if "error" in t)
    network = Network("tiny", (NetworkTask(workload, 2.0), NetworkTask(Matmul(16, 32, 32), 0.0)))
    [vendor] = time_network_references(network)  # PyTorch's references of each live layer, the same path
    assert vendor["layers"][0]["latency_s"] == 1e-4 and vendor["layers"][0]["layouts"] == {"row-major": 1e-4}
    assert "latency_s" not in vendor["layers"][1] and vendor["latency_s"] == 2e-4
    assert vendor["gflops"] == pytest.approx(network.gflop / 2e-4) and vendor["library"] == "PyTorch weighted sum (MKL)"


def test_one_board_writes_a_layer_and_a_network_through_one_path(tmp_path):
    board = Leaderboard(env_ids=["e"], agents=["random"], seeds=[0], budget=2, trial_points=(1, 2), time_points=(1.0,))
    board.results[("e", "random")] = [TuningResult("random", "w", "w", "tiles", "t", 0, 2, None,
                                                   [Trial(i, 0.5 * i, None, "ok", 5.0 * i, 5.0 * i, True)
                                                    for i in (1, 2)], None, 10.0)]
    paths = write_tables(board, tmp_path / "layer")
    assert [p.name for p in paths.values()] == ["compare.csv", "compare.json", "compare.md", "curves.json"]
    rows = list(csv.reader(paths["csv"].open()))
    assert rows[0] == ["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"]
    assert rows[1][:5] == ["e", "", "random", "@1", "5"]
    assert plot_curves(board, tmp_path / "layer")[0].stat().st_size > 0

    net = Leaderboard(env_ids=["Network-tiny-v0"], agents=["round-robin"], seeds=[0], budget=2, trial_points=None,
                      time_points=None)
    net.labels["Network-tiny-v0"] = "tiny"
    net.results[("Network-tiny-v0", "round-robin")] = [_network_result([_network_trial(i, 1e-3 / i) for i in (1, 2)],
                                                                       "round-robin")]
    paths = write_tables(net, tmp_path / "network")
    assert [p.name for p in paths.values()] == ["compare.csv", "compare.json", "compare.md", "curves.json"]
    rows = list(csv.reader(paths["csv"].open()))
    assert rows[0] == ["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"]
    assert rows[1][:5] == ["Network-tiny-v0", "tiny", "round-robin", "@1", "1000"]  # 25 % of the budget
    assert {"to-RR", "%RR"} <= {row[3] for row in rows}  # the reference scheduler is on the board
    assert paths["md"].read_text().startswith("| env | agent | n |") and "A network's GFLOP/s" in \
        paths["md"].read_text()
    assert plot_curves(net, tmp_path / "network")[0].stat().st_size > 0


def test_a_network_run_is_listed_per_task():
    result = _network_result([_network_trial(1, 4e-4)])
    table = task_table(result, {"latency_s": 8e-4, "layers": [{"latency_s": 4e-4}, {"latency_s": 0.5e-4}]})
    lines = {line.split()[0]: line.split() for line in table.splitlines()[2:]}
    assert lines["n/a"][1:4] == ["2", "0.2000", "all"] and lines["n/a"][-1] == "2.00x"
    assert lines["n/b"][-1] == "0.50x" and lines["total"][-1] == "2.00x"


def test_the_cli_reports_every_board_the_same_way(capsys):
    board = Leaderboard(env_ids=["Network-tiny-v0"], agents=["gradient"], seeds=[0], budget=2)
    board.errors.append({"env": "Network-tiny-v0", "agent": "gradient", "seed": 0, "error": "ValueError: no\nmore"})
    assert report(board, "out") == 1
    out, _ = capsys.readouterr()
    assert "\nFAILED: gradient on Network-tiny-v0 (seed 0): ValueError: no\nwritten to " in out
    board.errors.clear()
    assert report(board, "out") == 0


def test_the_layer_and_network_pairs_of_modules_are_gone():
    for name in ("tensorgym.rounds", "tensorgym.baselines.network_board", "tensorgym.baselines.network_render",
                 "tensorgym.baselines.network_vendor", "tensorgym.baselines.network_compare"):
        assert importlib.util.find_spec(name) is None, name
