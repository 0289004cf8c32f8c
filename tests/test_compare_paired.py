"""compare's winner against the vendor in one process (``paired_vendor``): chosen, kept, reused, dropped. No test
here asserts a speed: only that the figures exist and are sane."""

from __future__ import annotations

import argparse
import html
import json
import math
from types import SimpleNamespace

import gymnasium as gym
import pytest

from tensorgym.baselines import compare as compare_module
from tensorgym.baselines.board import Leaderboard, paired_text
from tensorgym.baselines.compare import PAIRED_PAIRS, compare, paired_reference
from tensorgym.baselines.vendor import time_vendor
from tensorgym.cli.compare import add_parser as add_compare_parser
from tensorgym.config import Config
from tensorgym.errors import InvalidTypeError
from tensorgym.text import slug
from tensorgym.tuner import TuningResult
from tensorgym.workloads import matmul

ENV = "tensorgym-test/PairedMatmul64-v0"
if ENV not in gym.registry:
    gym.register(id=ENV, entry_point="tensorgym.envs.registration:make_env",
                 kwargs={"workload": matmul(64, 64, 64, name="mm64")})


def _ref(backend: str, layout: str, gflops: float, weights: str = "per call", **extra) -> dict:
    return {"library": f"{backend} lib", "layout": layout, "backend": backend, "choice": layout, "gflops": gflops,
            "weights": weights, **extra}


def _paired(**extra) -> dict:
    """A paired entry as compare keeps it (figures invented)."""
    return {"agent": "random", "seed": 0, "space": "tiles", "config": {"a": 1}, "pairs": PAIRED_PAIRS,
            "speedup": 0.97, "spread": 0.012, "speedup_apart": 0.95, "vendor_drift": 0.004, "steal": 0.0, **extra}


def test_the_paired_line_names_the_kernel_the_vendor_and_every_figure():
    assert paired_text(_paired()) == ("paired in one process: 0.97x (spread 1.2 %, vendor drift +0.4 %, steal 0.0 %); "
                                      "timed apart: 0.95x")
    assert "vendor drift unknown, steal unknown" in paired_text(_paired(vendor_drift=None, steal=None))
    board = Leaderboard(env_ids=["E1", "E2"], agents=["random"], seeds=[0], budget=4)
    board.vendor["E1"] = [_ref("numpy", "row-major", 9.0), _ref("torch", "row-major", 8.0, paired=_paired())]
    board.vendor["E2"] = [_ref("torch", "row-major", 8.0)]
    assert board.paired_vendor("E1")["backend"] == "torch" and board.paired_vendor("E2") is None
    assert board.paired_vendor_lines() == [
        "E1: best kernel (random seed 0, tiles space) / torch lib row-major, paired in one process: 0.97x "
        "(spread 1.2 %, vendor drift +0.4 %, steal 0.0 %); timed apart: 0.95x"]
    assert board.to_json()["vendor"]["E1"][1]["paired"]["speedup"] == 0.97


def test_the_winner_is_paired_with_the_fastest_per_call_reference_pytorch_can_call_beside_it():
    refs = [_ref("numpy", "row-major", 50.0), _ref("torch", "row-major", 30.0, remeasured_gflops=20.0),
            _ref("onednn", "row-major", 25.0), _ref("mkl", "pre-packed", 60.0, weights="pre-packed")]
    workload = matmul(64, 64, 64)
    assert paired_reference(refs, workload)["backend"] == "onednn"  # numpy cannot share the kernel's process
    assert paired_reference(refs, workload, per_call=False)["backend"] == "mkl"
    assert paired_reference(refs[3:], workload)["backend"] == "mkl"  # no per-call one: the fastest of all
    assert paired_reference(refs[:1], workload) is None
    assert paired_reference(refs, workload.with_dtype("int8")) is None


def _result(agent: str, seed: int, config: Config, retimed: float) -> TuningResult:
    return TuningResult(agent, "w", "w", "tiles", "t", seed, 4, None, [], config, retimed,
                        extra={"remeasured_gflops": retimed})


def test_a_saved_paired_timing_is_reused_for_the_same_winner_and_redone_for_another(tmp_path, monkeypatch):
    calls = []

    def fake_timing(space, config, ref, *, pairs=PAIRED_PAIRS, native_blas=False):
        calls.append((space, config.to_json(), ref["backend"]))
        return {"space": space, "config": config.to_json(), "pairs": pairs, "speedup": 1.0, "spread": 0.0,
                "speedup_apart": 1.0, "vendor_drift": 0.0, "steal": 0.0}

    monkeypatch.setattr(compare_module, "time_paired_vendor", fake_timing)
    board = Leaderboard(env_ids=["E"], agents=["a", "b"], seeds=[0], budget=4)
    first, second = Config({"tile": 4}), Config({"tile": 8})
    board.results[("E", "a")] = [_result("a", 0, first, 10.0)]
    board.results[("E", "b")] = [_result("b", 0, second, 5.0)]
    board.vendor["E"] = [_ref("torch", "row-major", 8.0), _ref("onednn", "row-major", 7.0)]
    plan = SimpleNamespace(tuned={"E": matmul(64, 64, 64)}, native_blas=False,
                           vendor_path=lambda env_id: tmp_path / "vendor" / f"{env_id}.json")
    compare_module._pair_winner(board, "E", plan, space_for=lambda name: name)
    assert calls == [("tiles", {"tile": 4}, "torch")]
    saved = json.loads((tmp_path / "vendor" / "E.json").read_text())
    assert saved[0]["paired"]["agent"] == "a" and "paired" not in saved[1]
    compare_module._pair_winner(board, "E", plan, space_for=lambda name: name)
    assert len(calls) == 1  # the same winner and reference: reused
    board.results[("E", "b")][0].extra["remeasured_gflops"] = 20.0  # another winner
    compare_module._pair_winner(board, "E", plan, space_for=lambda name: name)
    assert calls[-1] == ("tiles", {"tile": 8}, "torch") and board.paired_vendor("E")["paired"]["agent"] == "b"


def test_paired_vendor_is_an_option_of_the_function_and_the_command(tmp_path):
    with pytest.raises(InvalidTypeError, match="paired_vendor"):
        compare([ENV], ["random"], budget=2, seeds=1, db=tmp_path / "r.db", out_dir=tmp_path / "out",
                paired_vendor="yes")
    parser = argparse.ArgumentParser()
    add_compare_parser(parser.add_subparsers())
    assert parser.parse_args(["compare", ENV]).no_paired_vendor is False
    assert parser.parse_args(["compare", ENV, "--no-paired-vendor"]).no_paired_vendor is True


def test_a_tiny_compare_pairs_its_winner_keeps_it_for_a_resume_and_drops_it_when_off(tmp_path, monkeypatch):
    db, out = tmp_path / "records.db", tmp_path / "out"
    # One vendor reference, saved where compare keeps them: it reuses it instead of timing all five.
    vendor_file = out / "vendor" / f"{slug(ENV)}.json"
    vendor_file.parent.mkdir(parents=True)
    vendor_file.write_text(json.dumps([time_vendor(matmul(64, 64, 64, name="mm64"), "torch", "row-major").to_json()]))
    run = dict(budget=4, seeds=1, db=db, out_dir=out, progress=False, plot=False, remeasure=1)

    board = compare([ENV], ["random"], **run)
    ref = board.paired_vendor(ENV)
    assert ref is not None and ref["backend"] == "torch"
    paired = ref["paired"]
    (result,) = board.results[(ENV, "random")]
    assert (paired["agent"], paired["seed"], paired["space"]) == ("random", 0, result.space)
    assert paired["config"] == result.best_config.to_json() and paired["pairs"] == PAIRED_PAIRS
    for key in ("speedup", "speedup_apart"):
        assert math.isfinite(paired[key]) and paired[key] > 0
    assert math.isfinite(paired["spread"]) and paired["spread"] >= 0
    assert len(paired["latency_ratios"]) == PAIRED_PAIRS and all(r > 0 for r in paired["latency_ratios"])
    (line,) = board.paired_vendor_lines()
    assert line.startswith(f"{ENV}: best kernel (random seed 0") and "paired in one process: " in line
    assert line in (out / "compare.md").read_text() and html.escape(line) in (out / "compare.html").read_text()
    assert json.loads(vendor_file.read_text())[0]["paired"] == paired  # kept with the vendor timings

    def no_timing(*args, **kwargs):
        raise AssertionError("a resumed compare timed the same winner against the vendor again")

    monkeypatch.setattr(compare_module, "time_against_vendor", no_timing)
    again = compare([ENV], ["random"], **run)
    assert again.paired_vendor(ENV)["paired"] == paired and again.paired_vendor_lines() == [line]

    off = compare([ENV], ["random"], **run, paired_vendor=False)
    assert off.paired_vendor(ENV) is None and off.paired_vendor_lines() == []
    assert "paired in one process" not in (out / "compare.md").read_text()
    assert "paired" not in json.loads(vendor_file.read_text())[0]
    assert off.vendor[ENV][0]["remeasured_gflops"] > 0  # the re-timed vendor stays
