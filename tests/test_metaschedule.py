"""The MetaSchedule peer: its space, the cheap TVMScript stack, results from its timeline, and (slow) a real run."""

import inspect
import json
import pickle

import numpy as np
import pytest

from fakes import SyntheticEvaluator
from tensorgym.agents import Agent, SearchAgent
from tensorgym.baselines.metaschedule import MetaScheduleAgent, MetaScheduleRun, MetaScheduleSpace
from tensorgym.baselines.metaschedule.design import Knob, signature_digest
from tensorgym.baselines.metaschedule.recording import trial_status as _status
from tensorgym.baselines.metaschedule.tvmscript import _stack_without_modules
from tensorgym.envs import make_env
from tensorgym.spaces import Config, SpaceError
from tensorgym.target import local_cpu
from tensorgym.workloads import matmul

WORKLOAD = matmul(64, 64, 64)


def _signature():
    """The shape of MetaSchedule's matmul design spaces on a CPU (3 spaces, cache_write variants)."""
    knobs = (Knob("k00_tile", "tile", parts=4, product=64, max_innermost=64),
             Knob("k01_tile", "tile", parts=4, product=64, max_innermost=64),
             Knob("k02_tile", "tile", parts=2, product=64, max_innermost=64),
             Knob("k03_par", "par", default=32), Knob("k04_cat", "cat", choices=(0, 16, 64, 512)))
    return (knobs, knobs, knobs)


def _space():
    return MetaScheduleSpace(WORKLOAD, local_cpu(), _signature())


def _config(**changes):
    values = {"space": 1, "k00_tile": (4, 1, 8, 2), "k01_tile": (2, 1, 2, 16), "k02_tile": (64, 1), "k03_par": 32,
              "k04_cat": 2}
    return Config({**values, **changes})


def test_space_checks_configs_against_the_design_spaces():
    space = _space()
    space.check(_config())
    for bad in [_config(space=3), _config(k00_tile=(4, 1, 8, 4)), _config(k02_tile=(1, 64, 1)),
                _config(k04_cat=4), _config(k03_par=0), Config({"space": 0})]:
        with pytest.raises(SpaceError):
            space.check(bad)


def test_space_samples_valid_configs_and_encodes_them_in_the_unit_box():
    space = _space()
    configs = space.sample_many(np.random.default_rng(0), 50)
    assert len(configs) == 50 and {c["space"] for c in configs} == {0, 1, 2}
    for config in configs:
        space.check(config)
        vector = space.encode(config)
        assert vector.shape == (space.encoding_size,) and vector.min() >= 0 and vector.max() <= 1
    assert "k04_cat=64" in space.describe(_config())


def test_space_pickles_with_its_signature_and_has_no_hop_neighbourhood():
    space = pickle.loads(pickle.dumps(_space()))
    assert signature_digest(space.signature) == signature_digest(_signature())
    with pytest.raises(NotImplementedError, match="tiles space"):
        space.neighbours(_config())


def test_cheap_stack_sees_the_same_frames_as_inspect():
    def probe():
        return inspect.stack(), _stack_without_modules()

    full, cheap = probe()
    assert [(f.function, f.lineno, f.filename) for f in cheap] == [(f.function, f.lineno, f.filename) for f in full]
    assert cheap[0].frame is full[0].frame and cheap[2].code_context == full[2].code_context


def test_metaschedule_statuses():
    assert _status(None, None) == "ok"
    assert _status("LocalBuilder: An exception occurred", None) == "build_error"
    assert _status(None, "LocalRunner: Timeout, killed after 30 seconds") == "timeout"
    assert _status(None, "LocalRunner: An exception occurred") == "runtime_error"


def _fake_run(tmp_path, n=12, failed=(3,)):
    space = _space()
    configs = space.sample_many(np.random.default_rng(1), n)
    trials = []
    for i, config in enumerate(configs):
        latency = None if i in failed else WORKLOAD.flops / ((10 + i) * 1e9)  # i-th trial: 10 + i GFLOP/s
        trials.append({"elapsed_s": 5.0 + i, "status": "build_error" if i in failed else "ok", "latency_s": latency,
                       "error": "", "config": config.to_json()})
    top = sorted((i for i in range(n) if i not in failed), key=lambda i: trials[i]["latency_s"])[:3]
    return MetaScheduleRun(signature=_signature(), trials=trials, tune_s=5.0 + n, top=top, work_dir=str(tmp_path))


def test_result_keeps_metaschedule_timeline_and_headlines_the_retimed_best(tmp_path):
    run = _fake_run(tmp_path)
    evaluator = SyntheticEvaluator(_space(), lambda c: 100.0 + c["k04_cat"])
    result = MetaScheduleAgent()._result(run, evaluator, seed=0, budget=12, time_budget=None, wall_s=1.0)
    assert len(result.trials) == 12 == result.measured and result.space == "metaschedule"
    assert [t.index for t in result.trials] == list(range(1, 13))
    assert result.trials[3].status == "build_error" and result.trials[3].gflops is None
    assert result.trials[-1].best_gflops == pytest.approx(21.0)  # MetaSchedule's own best, on its timeline
    assert result.best_at(trials=5) == pytest.approx(14.0) and result.best_at(seconds=6.5) == pytest.approx(11.0)
    assert evaluator.measured == 3  # the top 3 re-timed, not charged as trials
    assert result.best_gflops == max(r["gflops"] for r in result.extra["retimed"]) >= 100.0
    assert result.extra["metaschedule_best_gflops"] == pytest.approx(21.0)
    assert result.best_config in {Config.from_json(run.trials[i]["config"]) for i in run.top}


def test_a_finished_run_is_reused_from_its_work_dir(tmp_path):
    run = _fake_run(tmp_path)
    data = {"signature": [[k.to_json() for k in knobs] for knobs in run.signature], "trials": run.trials,
            "tune_s": run.tune_s, "top": run.top, "design_spaces": 3, "unmatched": 0}
    (tmp_path / "result.json").write_text(json.dumps(data))
    again = MetaScheduleAgent().run_metaschedule(WORKLOAD, local_cpu(), tmp_path, budget=12, time_budget=None,
                                                 seed=0)
    assert again.trials == run.trials and again.top == run.top and again.signature == run.signature


def test_bad_arguments():
    with pytest.raises(ValueError, match="top_k"):
        MetaScheduleAgent(top_k=0)
    # MetaSchedule runs its own search: it is an Agent, not a SearchAgent over a Tuner
    assert isinstance(MetaScheduleAgent(), Agent) and not isinstance(MetaScheduleAgent(), SearchAgent)


@pytest.mark.slow
def test_metaschedule_end_to_end_on_a_small_matmul(tmp_path, measurer):
    env = make_env(WORKLOAD, db=tmp_path / "records.db", measurer=measurer)
    try:
        result = MetaScheduleAgent(top_k=2).tune(env, budget=8, seed=0)
        assert len(result.trials) == 8 and result.budget == 8 and result.agent == "metaschedule"
        assert result.extra["unmatched"] == 0 and result.extra["mismatched"] == []
        assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(result.trials, result.trials[1:]))
        assert result.trials[-1].best_gflops == pytest.approx(result.extra["metaschedule_best_gflops"])
        # The re-timed schedules are tensorgym records: checked against NumPy and stored.
        database = env.unwrapped.database
        stored = database.records(space="metaschedule")
        assert len(stored) == len(result.extra["retimed"]) == 2
        assert result.best_gflops > 0 and result.best_config in {r.config for r in stored if r.ok}
        space = MetaScheduleSpace(WORKLOAD, env.unwrapped.target)
        for record in stored:
            space.check(record.config)
        assert (tmp_path / "records.db.metaschedule").is_dir()
        again = MetaScheduleAgent(top_k=2).tune(env, budget=8, seed=0)  # reuses the finished run
        assert [t.config for t in again.trials] == [t.config for t in result.trials]
        assert again.best_gflops == result.best_gflops and len(database.records(space="metaschedule")) == 2
    finally:
        env.close()


def test_int8_and_bf16_kernels_take_blocked_layouts_that_round_trip():
    from tensorgym.baselines.metaschedule import packed
    from tensorgym.workloads import conv2d

    for workload in (conv2d(1, 6, 7, 7, 20, 3, 3, dtype="int8"), matmul(20, 40, 30, dtype="bf16")):
        assert packed.is_packed(workload) and not packed.is_packed(workload.with_dtype("float32"))
        inputs = workload.random_inputs()
        data, weights, out = packed.kernel_arguments(workload, inputs)
        g = 4 if workload.dtype == "int8" else 2
        assert weights.shape[-2:] == (16, g) and out.shape[-1] % 16 == 0
        # a blocked output holding the reference gives the reference back in the canonical layout
        reference = workload.reference(*inputs)
        blocked = np.zeros_like(out, dtype=np.float64)
        if workload.op == "conv2d":
            blocked[..., :workload.F] = reference.transpose(0, 2, 3, 1)
        else:
            blocked[:, :workload.N] = reference
        np.testing.assert_array_equal(packed.canonical_output(workload, blocked), reference)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_metaschedule_tensorizes_int8_and_bf16_with_tensorgyms_dot_products(tmp_path, measurer, dtype):
    workload = matmul(64, 64, 128, dtype=dtype)
    env = make_env(workload, space="mapping", db=tmp_path / "records.db", measurer=measurer)
    try:
        result = MetaScheduleAgent(top_k=2).tune(env, budget=8, seed=0)
        assert result.extra["unmatched"] == 0 and result.extra["mismatched"] == []
        stored = env.unwrapped.database.records(space="metaschedule")
        assert stored and all(r.ok for r in stored)  # checked against NumPy (exactly for int8) in its layouts
        assert result.best_gflops > 0
        space = MetaScheduleSpace(workload, env.unwrapped.target)
        design = [k.kind for k in space.signature[0]]
        assert "tile" in design
    finally:
        env.close()
