"""The mapping env, its dtypes through gym.make and the command line, and the search agents in the mapping space.

The env tests measure kernels on ``local_cpu()`` (after ``TENSORGYM_CPU``) with whatever intrinsics it has (AVX2's
at least); the agents and the ``mapping`` command's pruning run on constructed CPUs.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import tensorgym  # noqa: F401  (registers the ids)
from fakes import SyntheticEvaluator
from tensorgym.agents.dgd import DGDAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.cli import main
from tensorgym.envs import INVALID_ACTION_PENALTY, MappingEnv
from tensorgym.spaces.mapping import MappingSpace
from tensorgym.suites import all_suite_workloads
from tensorgym.target import constructed_cpu, local_cpu
from tensorgym.tuner import Tuner

NEEDS_AVX2 = pytest.mark.needs_isa("avx2", "fma")  # the least any CPU the mapping space runs on has
SHAPE = dict(M=32, N=32, K=64)
# A small conv: several kept candidates on every CPU (a matmul has one per intrinsic: one on AVX2)
CONV = dict(C=8, H=8, W=8, F=16, R=3, padding=1)


@pytest.fixture()
def make(tmp_path, measurer):
    envs = []

    def _make(dtype="int8", op="Matmul", **kwargs):
        shape = SHAPE if op == "Matmul" else CONV
        env = gym.make(f"tensorgym/{op}-v0", db=str(tmp_path / "env.db"), measurer=measurer, space="mapping",
                       dtype=dtype, **shape, **kwargs)
        envs.append(env)
        return env

    yield _make
    for env in envs:
        env.close()


def test_gym_make_takes_the_space_and_the_dtype(tmp_path):
    env = gym.make("Conv2d-ResNet18-C4-v0", space="mapping", dtype="int8", db=str(tmp_path / "x.db"))
    base = env.unwrapped
    assert isinstance(base, MappingEnv) and base.workload.dtype == "int8"
    assert base.workload.key.endswith("dtype=int8)") and base.workload.label == "ResNet-18/C4[int8]"
    space = base.search_space
    assert base.action_space.n == len(space.candidates) + 2 * len(space.coordinates)
    env.close()
    custom = gym.make("tensorgym/Conv2d-v0", C=3, H=17, F=127, R=3, stride=2, space="mapping", dtype="bf16",
                      db=str(tmp_path / "x.db"))
    assert custom.unwrapped.workload.dtype == "bf16"
    custom.close()
    with pytest.raises(ValueError, match="dtype 'int4' is not supported"):
        gym.make("Matmul-BERT-M3-v0", space="mapping", dtype="int4", db=str(tmp_path / "x.db"))
    with pytest.raises(ValueError, match="space='mapping'"):
        gym.make("Matmul-BERT-M3-v0", dtype="int8", db=str(tmp_path / "x.db"))  # the tiles space is fp32


@NEEDS_AVX2
@pytest.mark.parametrize("dtype", ["int8", pytest.param("bf16", marks=pytest.mark.slow)])
def test_gymnasium_and_sb3_env_checkers_pass(make, dtype):
    env = make(dtype)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped)


@NEEDS_AVX2
def test_switches_and_hops_are_measured_and_rewarded_as_speed_ratios(make):
    env = make("int8", op="Conv2d", render_mode="ansi")
    obs, info = env.reset(seed=0)
    base = env.unwrapped
    space = base.search_space
    assert info["unit"] == "GOP/s" and info["packing"] == "in-kernel" and info["candidate"] in space.candidates
    mask = info["action_mask"]
    current = space.candidate_of(base._config)
    switches = np.flatnonzero(mask[:base.n_candidates])
    assert set(switches) == set(space.kept) - {current}
    before = info["gflops"]
    obs, reward, terminated, truncated, info = env.step(int(switches[0]))
    assert info["status"] == "ok" and info["candidate"] == space.candidates[switches[0]]
    assert reward == pytest.approx(math.log2(info["gflops"] / before))
    hops = np.flatnonzero(info["action_mask"][base.n_candidates:]) + base.n_candidates
    before = info["gflops"]
    obs, reward, _, _, info = env.step(int(hops[0]))
    if info["status"] == "ok":
        assert reward == pytest.approx(math.log2(info["gflops"] / before))
    assert "GOP/s" in env.render()
    masked = int(np.flatnonzero(~info["action_mask"])[0])
    _, reward, _, _, after = env.step(masked)
    assert reward == INVALID_ACTION_PENALTY and after["config"] == info["config"]


@NEEDS_AVX2
def test_same_seed_gives_the_same_configs(make):
    def rollout(env):
        _, info = env.reset(seed=11)
        configs = [info["config"]]
        for step in range(4):
            legal = np.flatnonzero(info["action_mask"])
            _, _, _, _, info = env.step(int(legal[(3 * step) % len(legal)]))
            configs.append(info["config"])
        return configs

    assert rollout(make("int8")) == rollout(make("int8"))


# -- agents in the mapping space (synthetic measurements) ---------------------------------------------------
def _synthetic(space: MappingSpace):
    def perf(config):
        features = space.scaled_features(config)
        return float(10 + 40 * features[0] + 30 * features[3] + 5 * features[11] - 2 * features[13])

    return SyntheticEvaluator(space, perf)


@pytest.mark.parametrize("cpu", ["sapphirerapids", "haswell"])  # AMX + VNNI + AVX2; AVX2 alone
@pytest.mark.parametrize("agent", [GAAgent(population=256, batch_size=16), DGDAgent(initial_samples=16)])
def test_ga_and_dgd_search_the_mapping_space_within_budget(agent, cpu):
    space = MappingSpace(all_suite_workloads()["Conv2d-ResNet18-C5-v0"].with_dtype("int8"), constructed_cpu(cpu))
    runs = []
    for _ in range(2):
        tuner = Tuner(_synthetic(space), budget=48)
        tuner.run(agent, 0)
        assert len(tuner.trials) == 48
        for trial in tuner.trials:
            space.check(trial.config)
        runs.append([t.config for t in tuner.trials])
    assert runs[0] == runs[1]  # same seed, same configs
    assert len({space.candidate_of(c) for c in runs[0]}) > 3


# -- command line --------------------------------------------------------------------------------------------
def test_mapping_command_lists_candidates_fused_loops_and_rules(capsys, tmp_path):
    # a CPU this machine need not be able to act as: a constructed one, candidates only
    db = str(tmp_path / "none.db")
    assert main(["mapping", "Conv2d-ResNet18-C7-v0", "--dtype", "int8", "--target", "sapphirerapids", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "vnni512 i<-f r<-rc+ry+rx" in out and "im2col" in out and "kept" in out
    assert "by rule 'padding'" in out and "by rule 'exact'" in out
    assert main(["mapping", "Conv2d-ResNet18-C7-v0", "--dtype", "int8", "--all", "--target", "sapphirerapids",
                 "--db", db]) == 0
    assert "saturates" in capsys.readouterr().out
    # an AVX2 CPU: vpmaddwd's candidates kept, the AVX-512 and AMX ones masked by rule 'isa'
    assert main(["mapping", "Conv2d-ResNet18-C7-v0", "--dtype", "int8", "--all", "--target", "znver3",
                 "--db", db]) == 0
    out = capsys.readouterr().out
    assert "pmaddwd256 i<-f r<-rc+ry+rx" in out and "16 vector registers" in out
    assert "masked (isa): the CPU lacks avx512_vnni" in out and "saturates" not in out


def test_mapping_command_adds_the_best_measured_throughput_per_candidate(capsys, tmp_path):
    from tensorgym.config import Config
    from tensorgym.database import Database
    from tensorgym.record import Record, Status

    wl = all_suite_workloads()["Matmul-BERT-M3-v0"].with_dtype("int8")
    space = MappingSpace(wl, local_cpu())
    config = space.restricted(space.kept[0]).sample(np.random.default_rng(0))
    with Database(tmp_path / "r.db") as db:
        db.register(wl, space.target)
        for gops in (123.4, 567.8):
            db.commit(Record(wl.key, space.target.fingerprint, "mapping",
                             Config({**config, "unroll": 0 if gops < 200 else 16}), Status.OK,
                             latency_s=1e-3, latency_cv=0.0, gflops=gops))
    assert main(["mapping", "Matmul-BERT-M3-v0", "--dtype", "int8", "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    assert "best GOP/s (measured)" in out and "567.8 (2)" in out


def test_list_shows_spaces_and_dtypes(capsys):
    assert main(["list", "--suite", "BERT"]) == 0
    out = capsys.readouterr().out
    assert "mapping" in out and "int8" in out and "bf16" in out and "mapping: float32, int8, bf16" in out


def test_tune_refuses_a_space_that_cannot_take_the_dtype(capsys, tmp_path):
    code = main(["tune", "Matmul-BERT-M3-v0", "--dtype", "int8", "--space", "tiles", "--db", str(tmp_path / "x.db")])
    assert code == 2 and "use --space mapping" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()
