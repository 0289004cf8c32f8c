"""Layer runs and network runs share one mechanism where they used to have two: callbacks and their list and
progress bar, reading a timeline "after N trials or T seconds", result files and their resume, failed runs,
vendor timings, the board files and plots, and the CLI's report."""

from __future__ import annotations

import csv
import json

import pytest

from tensorgym.baselines import compare as compare_module
from tensorgym.baselines import vendor as vendor_module
from tensorgym.baselines.board import Leaderboard
from tensorgym.baselines.compare import _cached_vendor, _noting_failure, _parse_names, _read_saved
from tensorgym.baselines.network_board import NetworkBoard
from tensorgym.baselines.network_render import plot as plot_network
from tensorgym.baselines.network_render import write_tables as write_network_tables
from tensorgym.baselines.network_vendor import time_network_vendor
from tensorgym.baselines.render import plot_curves, write_tables
from tensorgym.baselines.vendor import VendorUnavailable, time_references
from tensorgym.cli.compare import report
from tensorgym.errors import InvalidArgumentError, InvalidTypeError
from tensorgym.network_result import NetworkResult, NetworkTrial, RoundLog, last_within
from tensorgym.network_tuning import NetworkCallback, NetworkProgressBar, as_network_callback
from tensorgym.networks import Network, NetworkTask
from tensorgym.tuner import CallbackList, ProgressBarCallback, Trial, TuningCallback, TuningResult, as_callback
from tensorgym.workloads import Matmul


# -- callbacks ---------------------------------------------------------------------------------------------
class _Log(NetworkCallback):
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


def _network_trial(index: int, estimate_s: float | None = 2e-3, elapsed_s: float | None = None) -> NetworkTrial:
    return NetworkTrial(index, index if elapsed_s is None else elapsed_s, 0, 0, "ok", 1e-3, estimate_s, True)


def test_one_callback_list_calls_every_hook_in_order_network_rounds_included():
    seen: list = []
    callbacks = as_network_callback([_Log(seen), _Log(seen)])
    assert isinstance(callbacks, CallbackList)
    callbacks.on_start("net", 8)
    callbacks.on_trial(_network_trial(1))
    callbacks.on_round(RoundLog(1, 0, (0,), 1, 1.0, 2e-3))
    callbacks.on_end()
    assert seen == [("start", "net", 8)] * 2 + [("trial", 1)] * 2 + [("round", 1)] * 2 + [("end",)] * 2


def test_a_layer_callback_ignores_rounds_and_a_network_run_refuses_one():
    TuningCallback().on_round(RoundLog(1, 0, (0,), 1, 1.0, None))  # a layer run has none: a no-op
    assert isinstance(as_callback([TuningCallback()]), CallbackList)
    with pytest.raises(InvalidTypeError, match="NetworkCallback"):
        as_network_callback(ProgressBarCallback())  # it would read best_gflops, which a network trial lacks
    with pytest.raises(InvalidTypeError, match="TuningCallback"):
        as_callback("progress")
    assert type(as_network_callback(None)) is NetworkCallback


def test_one_progress_bar_shows_what_it_is_given(monkeypatch):
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
    network = NetworkProgressBar()
    assert isinstance(network, ProgressBarCallback) and isinstance(network, NetworkCallback)
    network.on_start("net", 4)
    network.on_trial(_network_trial(1, 2.5e-3))
    network.on_trial(_network_trial(2, None))
    network.on_round(RoundLog(1, 0, (0,), 2, 2.0, 2.5e-3))
    network.on_end()
    assert shown == ["best 12.3 GFLOP/s", "closed", "network 2.500 ms", "network -", "closed"]


# -- one timeline reader --------------------------------------------------------------------------------------
def test_a_layer_and_a_network_timeline_are_read_the_same_way():
    layer = TuningResult("a", "w", "w", "tiles", "t", 0, 3, None,
                         [Trial(i, 0.5 * i, None, "ok", 10.0 * i, 10.0 * i, True) for i in (1, 2, 3)])
    network = NetworkResult("rr", "n", "tiles", "t", 0, 3, None, 1, "ga",
                            trials=[_network_trial(i, 1e-3 / i, 0.5 * i) for i in (1, 2, 3)])
    assert last_within(layer.trials, 2) is layer.trials[1] and last_within(network.trials, seconds=1.4).index == 2
    assert last_within(layer.trials, 0) is None and last_within(layer.trials, seconds=0.1) is None
    assert [layer.best_at(trials=n) for n in (0, 1, 2, 5)] == [0.0, 10.0, 20.0, 30.0]
    assert [network.estimate_at(trials=n) for n in (0, 1, 3)] == [None, 1e-3, 1e-3 / 3]
    assert layer.best_at(trials=3, seconds=1.0) == 20.0 and network.estimate_at(trials=3, seconds=1.0) == 5e-4


# -- the compare path both runs take ---------------------------------------------------------------------------
def test_names_are_parsed_the_same_for_agents_and_schedulers():
    assert _parse_names("random, ga") == ["random", "ga"]
    assert _parse_names(["gradient"], "schedulers") == ["gradient"]
    with pytest.raises(InvalidArgumentError, match="schedulers must be distinct"):
        _parse_names("gradient,gradient", "schedulers")
    with pytest.raises(InvalidTypeError, match="schedulers is a list of scheduler names"):
        _parse_names(3, "schedulers")


def test_result_files_are_read_back_or_ignored_the_same_way(tmp_path):
    layer = TuningResult("a", "w", "w", "tiles", "t", 0, 3, None, [Trial(1, 0.5, None, "ok", 1.0, 1.0, True)])
    network = NetworkResult("rr", "n", "tiles", "t", 0, 3, None, 1, "ga", trials=[_network_trial(1)])
    for result, parse in ((layer, TuningResult.from_json), (network, NetworkResult.from_json)):
        path = tmp_path / f"{type(result).__name__}.json"
        assert _read_saved(path, parse) is None  # none yet
        result.save(path)
        assert _read_saved(path, parse).to_json() == result.to_json()
        path.write_text("{not json")
        assert _read_saved(path, parse) is None  # unreadable: redone


def test_a_failed_run_is_noted_not_raised():
    errors: list[dict] = []
    result = None
    with _noting_failure(errors, {"scheduler": "gradient", "seed": 1}):
        result = 1 / 0
    assert result is None and list(errors[0]) == ["scheduler", "seed", "error", "seconds"]
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
    vendor = time_network_vendor(network)  # PyTorch's references of each live layer, the same path
    assert vendor.layers[0]["latency_s"] == 1e-4 and vendor.layers[0]["layouts"] == {"row-major": 1e-4}
    assert "latency_s" not in vendor.layers[1] and vendor.estimate_s == 2e-4


def test_both_boards_write_their_files_and_plots_through_one_path(tmp_path):
    board = Leaderboard(env_ids=["e"], agents=["random"], seeds=[0], budget=2, trial_points=(1, 2), time_points=(1.0,))
    board.results[("e", "random")] = [TuningResult("random", "w", "w", "tiles", "t", 0, 2, None,
                                                   [Trial(i, 0.5 * i, None, "ok", 5.0 * i, 5.0 * i, True)
                                                    for i in (1, 2)], None, 10.0)]
    paths = write_tables(board, tmp_path / "layer")
    assert [p.name for p in paths.values()] == ["compare.csv", "compare.json", "compare.md"]
    rows = list(csv.reader(paths["csv"].open()))
    assert rows[0] == ["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"]
    assert rows[1][:5] == ["e", "", "random", "@1", "5"]
    net = NetworkBoard(network="tiny", schedulers=["round-robin"], seeds=[0], budget=2)
    net.results["round-robin"] = [NetworkResult("round-robin", "tiny", "tiles", "t", 0, 2, None, 1, "ga",
                                                trials=[_network_trial(i, 1e-3 / i) for i in (1, 2)])]
    paths = write_network_tables(net, tmp_path / "network")
    assert [p.name for p in paths.values()] == ["compare_network.csv", "compare_network.json", "compare_network.md"]
    rows = list(csv.reader(paths["csv"].open()))
    assert rows[0] == ["network", "scheduler", "metric", "mean", "min", "max", "n", "values"]
    assert rows[1][:5] == ["tiny", "round-robin", "@1", "1", "1"]
    assert paths["md"].read_text().startswith("| scheduler | n |") and "tiny, tiles space" in paths["md"].read_text()
    assert plot_curves(board, tmp_path / "layer")[0].stat().st_size > 0
    assert plot_network(net, tmp_path / "network").stat().st_size > 0


def test_the_cli_reports_both_boards_the_same_way(capsys):
    errors = [{"scheduler": "gradient", "seed": 0, "error": "ValueError: no\nmore"}]
    assert report("TABLE", "NOTE", errors, lambda e: f"{e['scheduler']} (seed {e['seed']})", "out", "busy") == 1
    out, err = capsys.readouterr()
    assert out == "\nTABLE\n\nNOTE\nFAILED: gradient (seed 0): ValueError: no\nwritten to out\n" and err == "busy\n"
    assert report("TABLE", "NOTE", [], str, "out") == 0


def test_the_compare_modules_keep_no_second_copy():
    # The network module reuses the layer one's helpers instead of keeping its own.
    from tensorgym.baselines import network_compare, network_render

    assert network_compare._read_saved is compare_module._read_saved
    assert not hasattr(network_compare, "_load") and not hasattr(network_render, "_band")
