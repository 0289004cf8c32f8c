"""Benchmark sub-spaces of the microkernel space, and their landscapes: counting, moves, rebuilding, the env.

Everything runs on a constructed Zen 4 with an unmeasured catalogue of the quick candidates (no kernel is
compiled or timed, whatever this machine is), and landscapes are made of hand-made records.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

from fakes import SYMBOLIC_CPU
from tensorgym.catalog import make_agent
from tensorgym.cli import landscape as landscape_cli
from tensorgym.database import Database
from tensorgym.envs import make_env
from tensorgym.errors import TensorgymError
from tensorgym.landscape import Landscape, LandscapeEvaluator, LandscapeNotFound, export_landscape, find_landscape
from tensorgym.landscape.shipped import landscape_filename, shipped_landscapes
from tensorgym.record import Record, Status
from tensorgym.spaces import SpaceError
from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, MicrokernelSpace, enumerate_microkernels
from tensorgym.spaces.microkernel.benchmark import (
    MicrokernelBenchmarkSpace, _loops, benchmark_bounds, benchmark_space,
)
from tensorgym.suites import SUITES
from tensorgym.workloads import conv2d, matmul

TARGET = SYMBOLIC_CPU
R5 = SUITES["ResNet-50"]["R5"]
SMALL = conv2d(1, 32, 14, 14, 32, 3, 3, 1, "same", name="small")  # 14x14 outputs, 2 vectors of channels
MAX = 300


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    """The quick candidates, all kept, at made-up fractions of peak (no measurement)."""
    base = Catalogue.unmeasured(TARGET, enumerate_microkernels(EnumerationRules.for_target(TARGET, quick=True)))
    rng = np.random.default_rng(0)
    entries = tuple(type(e)(e.microkernel, "ok", float(0.7 + 0.3 * rng.random())) for e in base.entries)
    return Catalogue(fingerprint=TARGET.fingerprint, target_label=TARGET.label, lanes=base.lanes,
                     registers=base.registers, peak_gflops=1.0, mode="quick", rules=base.rules, entries=entries,
                     threshold=0.8)


@pytest.fixture(scope="module")
def space(catalogue) -> MicrokernelBenchmarkSpace:
    return benchmark_space(SMALL, TARGET, catalogue=catalogue, max_configs=MAX)


def test_counting_is_exact_and_matches_enumeration(space, catalogue):
    configs = space.configs()
    assert 0 < len(configs) == space.size <= MAX and len(set(configs)) == len(configs)
    assert configs == sorted(configs, key=lambda c: c.key)  # a fixed order: a landscape's rows
    full = MicrokernelSpace(SMALL, TARGET, catalogue=catalogue)
    for config in configs:
        full.check(config)  # a config of the full space, same knobs: records are shared
        space.check(config)
    big = benchmark_space(R5, TARGET, catalogue=catalogue)
    assert 500 < big.size <= 1536


def test_sample_and_neighbours_stay_inside(space):
    rng = np.random.default_rng(1)
    members = set(space.configs())
    draws = [space.sample(rng) for _ in range(200)]
    assert set(draws) <= members
    assert len({space.selection_of(c) for c in draws}) == len(space.selections)  # every kept selection drawn
    moved = 0
    for config in draws[:40]:
        for hops in (1, 2):
            near = space.neighbours(config, hops)
            assert set(near) <= members
            moved += len(near)
    assert moved > 0
    assert set(space.sample_many(rng, space.size + 10)) == members  # a small space runs dry, inside


def test_configs_outside_are_refused_in_one_line(space, catalogue):
    full = MicrokernelSpace(SMALL, TARGET, catalogue=catalogue)
    rng = np.random.default_rng(2)
    outside = next(c for c in (full.sample(rng) for _ in range(500)) if c not in space)
    with pytest.raises(SpaceError) as info:
        space.check(outside)
    assert "\n" not in str(info.value) and not space.is_valid(outside)


def test_rules_keep_at_least_one_choice_per_axis(catalogue):
    full = MicrokernelSpace(SMALL, TARGET, catalogue=catalogue)
    for max_configs in (1, 20, MAX):
        bounds = benchmark_bounds(full, max_configs=max_configs)
        assert bounds["selections"] and all(bounds["axes"][axis] for axis in [*_loops(full), "parallel"])
        cut = MicrokernelBenchmarkSpace(SMALL, TARGET, bounds=bounds, catalogue=catalogue)
        assert 0 < cut.size <= max_configs
        assert all(any(c for c in cut.configs() if cut.selection_of(c) == s) for s in cut.selections)


def test_the_anchor_is_kept(catalogue):
    full = MicrokernelSpace(SMALL, TARGET, catalogue=catalogue)
    rng = np.random.default_rng(3)
    for _ in range(8):
        anchor = full.sample(rng)
        kept = benchmark_space(SMALL, TARGET, catalogue=catalogue, max_configs=MAX, anchor=anchor)
        assert anchor in kept and kept.size <= MAX
        assert kept.selections[0] == full.selection_of(anchor)


def test_the_space_rebuilds_from_its_options_without_a_catalogue_cache(space, tmp_path):
    again = MicrokernelBenchmarkSpace(SMALL, TARGET, **space.options)
    assert again.configs() == space.configs() and again.options == space.options
    import pickle

    assert pickle.loads(pickle.dumps(space)).configs() == space.configs()


def synthetic_records(space) -> list[Record]:
    rng = np.random.default_rng(0)
    wl = space.workload
    out = []
    for i, config in enumerate(space.configs()):
        common = dict(workload=wl.key, target=space.target.fingerprint, space=space.name, config=config,
                      build_s=0.3, created=time.time() - 100 + i)
        if i % 11 == 4:
            out.append(Record(status=Status.BUILD_ERROR, error="boom", wall_s=0.2, **common))
            continue
        samples = tuple(float(s) for s in 1e-4 * (1 + rng.random()) * (1 + 0.03 * rng.standard_normal(5)))
        median = float(np.median(samples))
        out.append(Record(status=Status.OK, latency_s=median, latency_cv=0.03, samples=samples, number=10,
                          gflops=wl.gflops(median), run_s=0.2, wall_s=0.35, timing="full", **common))
    return out


@pytest.fixture(scope="module")
def land(space) -> Landscape:
    with Database(":memory:") as db:
        db.register(space.workload, space.target)
        for record in synthetic_records(space):
            db.commit(record)
        return export_landscape(db, space, llvm_version="test")


def test_a_landscape_round_trips_and_rebuilds_its_space_without_tvm(land, space, tmp_path):
    assert land.space_name == "microkernel" and land.complete and land.metadata.fma_peak_gflops == 1.0
    path = land.save(tmp_path / landscape_filename(SMALL, "microkernel"))
    again = Landscape.load(path)
    assert again.metadata == land.metadata and again.configs == land.configs == tuple(space.configs())
    assert again.problems() == []
    code = ("import sys\nfrom tensorgym.landscape import Landscape, LandscapeEvaluator\n"
            f"land = Landscape.load({str(path)!r})\nspace = land.space()\n"
            "assert type(space).__name__ == 'MicrokernelBenchmarkSpace' and space.configs() == list(land.configs)\n"
            "e = LandscapeEvaluator(land, seed=0)\nassert len(e.evaluate(list(land.configs))) == len(land)\n"
            "assert 'tvm' not in sys.modules, 'tvm was imported'\n")
    # An empty catalogue cache: the space must come from the file alone.
    env = {"TENSORGYM_CACHE": str(tmp_path / "no-cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_evaluator_says_a_config_is_outside_the_bounded_space(land, catalogue):
    evaluator = LandscapeEvaluator(land, seed=0)
    full = MicrokernelSpace(SMALL, TARGET, catalogue=catalogue)
    rng = np.random.default_rng(4)
    outside = next(c for c in (full.sample(rng) for _ in range(500))
                   if c not in evaluator.space and evaluator.space.full_space().is_valid(c))
    with pytest.raises(TensorgymError, match="outside the landscape's bounded space"):
        evaluator.evaluate([outside])


def test_the_env_steps_on_the_landscape_backend(land):
    env = make_env(SMALL, space="microkernel", backend="landscape", landscape=land)
    members = set(land.configs)
    built = []
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        rng = np.random.default_rng(seed)
        terminated = truncated = False
        while not (terminated or truncated):
            mask = env.action_masks()
            assert mask.any()
            obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert terminated and info["config"] is not None
        config = env.unwrapped.config
        assert config in members
        row = land.index_of(config)
        assert (info["status"] == "ok") == bool(land.ok[row])
        built.append(config)
    assert len(set(built)) > 1
    assert env.evaluator.measured == 0
    env.close()


def test_gym_make_and_agents_run_on_a_microkernel_landscape(land, tmp_path):
    path = land.save(tmp_path / "small-microkernel.json.gz")
    env = gym.make("tensorgym/Conv2d-v0", C=32, H=14, F=32, R=3, space="microkernel", backend="landscape",
                   landscape=str(path))
    try:
        for name in ("random", "random-structured"):
            result = make_agent(name).tune(env, budget=32, seed=0)
            assert result.space == "microkernel" and len(result.trials) == 32
            assert all(t.config in land for t in result.trials)
            assert result.best_gflops <= float(land.scores.max()) * 1.5
    finally:
        env.close()


def test_shipped_lookup_finds_microkernel_files(land, tmp_path):
    folder = tmp_path / "some-cpu"
    folder.mkdir()
    name = landscape_filename(R5, "microkernel")
    assert name == "R5-microkernel.json.gz"
    land.save(folder / name)
    shipped = shipped_landscapes(tmp_path)
    assert [(s.cpu, s.layer, s.space) for s in shipped] == [("some-cpu", "R5", "microkernel")]
    assert find_landscape("Conv2d-ResNet-R5-v0", "microkernel", cpu="some-cpu", root=tmp_path) == folder / name
    with pytest.raises(LandscapeNotFound):
        find_landscape("Conv2d-ResNet-R5-v0", "tiles", cpu="some-cpu", root=tmp_path)


def test_bad_input_gets_one_line_errors(land, space, catalogue):
    cases = [
        lambda: benchmark_space(matmul(64, 64, 64), TARGET, catalogue=catalogue),
        lambda: MicrokernelBenchmarkSpace(SMALL, TARGET, bounds={"template": []}, catalogue=catalogue),
        lambda: MicrokernelBenchmarkSpace(SMALL, TARGET, bounds={**space.bounds, "selections": [[[9, 9, 9, 9, 9],
                                                                                                  [1]]]},
                                          catalogue=catalogue),
        lambda: benchmark_bounds(space),
        lambda: benchmark_bounds(MicrokernelSpace(SMALL, TARGET, catalogue=catalogue), max_configs=0),
        lambda: make_env(SMALL, space="tiles", backend="landscape", landscape=land),  # a microkernel landscape
        lambda: make_env(SMALL, space="mapping", backend="landscape", landscape=land),
    ]
    for case in cases:
        with pytest.raises(TensorgymError) as info:
            case()
        assert "\n" not in str(info.value), str(info.value)


def _cli_args(**kwargs) -> argparse.Namespace:
    base = dict(env_id="Matmul-BERT-M3-v0", db=":memory:", space="microkernel", max_configs=None, target="llvm",
                anchor_db=None, anchor_budget=512)
    return argparse.Namespace(**{**base, **kwargs})


def test_the_cli_refuses_what_it_cannot_measure_in_one_line(tmp_path):
    with pytest.raises(TensorgymError, match="defined for conv2d layers") as info:
        landscape_cli._anchored_space(_cli_args(db=str(tmp_path / "x.db")))
    assert "\n" not in str(info.value)
    with pytest.raises(SystemExit):  # argparse: an unknown space is refused with the choices
        parser = argparse.ArgumentParser()
        landscape_cli.add_parser(parser.add_subparsers())
        parser.parse_args(["landscape", "measure", "Conv2d-ResNet-R5-v0", "--db", "x.db", "--space", "mapping"])
    assert landscape_cli.SPACES == ("tiles", "microkernel")
