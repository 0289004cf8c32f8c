"""The landscape backend: seeded draws from the recorded samples, the live pipeline's clock, no TVM."""

from __future__ import annotations

import dataclasses
import heapq
import subprocess
import sys

import numpy as np
import pytest

from fakes import SYMBOLIC_CPU, run_search
from test_landscape_data import TINY, filled_database, synthetic_landscape, synthetic_records, tiny_space
from tensorgym.catalog import make_agent, make_space
from tensorgym.errors import TensorgymError
from tensorgym.evaluator import Evaluator, NotMeasured
from tensorgym.landscape import LandscapeError, LandscapeEvaluator, NotInLandscape, export_landscape
from tensorgym.tuner import Tuner


@pytest.fixture(scope="module")
def land():
    return synthetic_landscape()


def latencies(evaluator: LandscapeEvaluator, configs) -> list:
    return [r.latency_s for r in evaluator.evaluate(configs)]


def test_draws_are_seeded_and_reproducible(land):
    configs = list(land.configs)
    a, b = LandscapeEvaluator(land, seed=3), LandscapeEvaluator(land, seed=3)
    assert latencies(a, configs) == latencies(b, configs)
    other = LandscapeEvaluator(land, seed=4)
    assert latencies(other, configs) != latencies(a, configs)
    other.seed(3)
    assert latencies(other, configs) == latencies(a, configs)
    rng_based = LandscapeEvaluator(land, seed=np.random.default_rng(3))
    assert latencies(rng_based, configs) == latencies(a, configs)
    assert isinstance(a, Evaluator) and a.database is None


def test_a_configs_draw_does_not_depend_on_order_or_repeats(land):
    evaluator = LandscapeEvaluator(land, seed=0)
    configs = list(land.configs)
    forward = dict(zip(configs, latencies(evaluator, configs)))
    backward = dict(zip(configs[::-1], latencies(evaluator, configs[::-1])))
    assert forward == backward
    assert evaluator.lookup(configs[5]).latency_s == forward[configs[5]]
    assert evaluator.reused == 2 * len(configs)


@pytest.mark.parametrize("noise", ["bootstrap", "sample", "none"])
def test_latencies_come_from_the_recorded_samples(land, noise):
    evaluator = LandscapeEvaluator(land, seed=1, noise=noise)
    for row, record in enumerate(evaluator.evaluate(land.configs)):
        recorded = land.record(row)
        assert (record.status, record.build_s, record.run_s, record.samples, record.timing) == (
            recorded.status, recorded.build_s, recorded.run_s, recorded.samples, recorded.timing)
        if not record.ok:
            assert record.latency_s is None and record.gflops is None and record.score == 0.0
            continue
        samples = land.samples[row]
        if noise == "sample":
            assert record.latency_s in samples
        elif noise == "none":
            assert record.latency_s == land.latency_s[row]
        else:
            assert min(samples) <= record.latency_s <= max(samples)
        assert record.gflops == pytest.approx(TINY.flops / record.latency_s / 1e9)
        assert record.workload == TINY.key and record.target == land.fingerprint and record.space == "tiles"


def test_bootstrap_draws_spread_like_the_median_and_sample_draws_wider(land):
    row = int(np.flatnonzero((land.sample_count >= 8) & land.ok)[0])
    config = land.configs[row]
    spread = {}
    for noise in ("bootstrap", "sample"):
        evaluator = LandscapeEvaluator(land, noise=noise)
        drawn = []
        for seed in range(300):
            evaluator.seed(seed)
            drawn.append(evaluator.lookup(config).latency_s)
        spread[noise] = np.std(drawn)
        assert set(drawn) != {drawn[0]}
    assert spread["bootstrap"] < spread["sample"]


def test_the_clock_accounts_parallel_builds_and_serial_runs(land):
    evaluator = LandscapeEvaluator(land, seed=0)  # 2 build workers: the landscape's cores
    assert evaluator.build_workers == land.metadata.cores == 2
    one = evaluator.evaluate([land.configs[0]])[0]
    assert one.wall_s == pytest.approx(land.build_s[0] + land.run_s[0])
    rows = list(range(10, 17))
    batch = evaluator.evaluate([land.configs[r] for r in rows])
    free = [0.0, 0.0]
    for r in rows:
        heapq.heappush(free, heapq.heappop(free) + land.build_s[r])
    share = max(free) / len(rows)
    assert [r.wall_s for r in batch] == pytest.approx([share + land.run_s[r] for r in rows])
    # A repeated config is built once and charged like the others.
    twice = evaluator.evaluate([land.configs[0], land.configs[0]])
    assert twice[0].wall_s == twice[1].wall_s == pytest.approx(land.build_s[0] + land.run_s[0])
    recorded = LandscapeEvaluator(land, seed=0, clock="recorded").evaluate([land.configs[r] for r in rows])
    assert [r.wall_s for r in recorded] == pytest.approx([land.wall_s[r] for r in rows])
    wide = LandscapeEvaluator(land, seed=0, build_workers=16).evaluate([land.configs[r] for r in rows])
    assert wide[0].wall_s == pytest.approx(max(land.build_s[r] for r in rows) / len(rows) + land.run_s[rows[0]])


def test_the_build_overhead_is_estimated_from_the_recorded_walls():
    import dataclasses

    from test_landscape_data import filled_database, synthetic_records
    from tensorgym.landscape import export_landscape

    space = tiny_space()
    # Measured in batches that kept both builders busy, each build holding its worker 50 ms beyond its compile time.
    records = [dataclasses.replace(r, wall_s=(r.build_s + 0.05) / 2 + r.run_s) for r in synthetic_records(space)]
    with filled_database(space, records) as db:
        land = export_landscape(db, space, llvm_version="test")
    evaluator = LandscapeEvaluator(land, seed=0)
    assert evaluator.build_overhead_s == pytest.approx(0.05, rel=1e-3)
    one = evaluator.evaluate([land.configs[0]])[0]
    assert one.wall_s == pytest.approx(land.build_s[0] + 0.05 + land.run_s[0], rel=1e-4)
    assert one.build_s == land.build_s[0]  # the record keeps the compile time it reported
    assert LandscapeEvaluator(land, build_overhead_s=0.0).evaluate([land.configs[0]])[0].wall_s == pytest.approx(
        land.build_s[0] + land.run_s[0])
    # Batches of 16 (as measured) cost on average what the recorded walls say.
    evaluator = LandscapeEvaluator(land, seed=0)
    charged = sum(r.wall_s for i in range(0, len(land), 16) for r in evaluator.evaluate(land.configs[i:i + 16]))
    assert charged == pytest.approx(land.wall_s.sum(), rel=0.05)


def test_the_tuner_charges_the_simulated_clock(land):
    evaluator = LandscapeEvaluator(land, seed=0)
    tuner = Tuner(evaluator, budget=40)
    configs = list(land.configs[:40])
    records = []
    for i in range(0, 40, 8):
        records += tuner.measure(configs[i:i + 8])
    charged = sum(r.wall_s for r in records)
    assert tuner.elapsed == pytest.approx(charged, abs=0.5)  # plus the tuner's own (tiny) compute
    assert tuner.elapsed >= charged
    assert [t.elapsed_s for t in tuner.trials] == sorted(t.elapsed_s for t in tuner.trials)


def test_a_landscape_run_reads_as_simulated_measurements_and_never_as_busy():
    space = tiny_space()
    busy = [dataclasses.replace(r, contention=0.5) for r in synthetic_records(space)]  # measured on a busy machine
    with filled_database(space, busy) as db:
        land = export_landscape(db, space, llvm_version="test")
    evaluator = LandscapeEvaluator(land, seed=0)
    assert evaluator.simulated and not Evaluator.simulated
    tuner = Tuner(evaluator, budget=24)
    tuner.measure(list(land.configs[:8]))
    tuner.measure(list(land.configs[8:16]))
    result = tuner.result("test")
    assert result.simulated and result.measured == 16 and result.reused == 0  # each a simulated measurement
    assert all(t.fresh for t in result.trials) and len(result.trials) == 16
    assert result.extra["busy_trials"] == 0  # the landscape's contention was its measuring machine's, not this run's
    again = type(result).from_json(result.to_json())
    assert again.simulated and again.measured == 16


def test_agents_search_it_like_any_evaluator(land):
    for name in ("random", "ga"):
        evaluator = LandscapeEvaluator(land, seed=0)
        result = run_search(make_agent(name), Tuner(evaluator, budget=48), seed=0)
        assert len(result.trials) == 48 and result.best_gflops > 0
        assert result.best_gflops <= max(evaluator.drawn_scores) + 1e-9
        assert all(t.config in land for t in result.trials)


def test_configs_outside_the_landscape_are_refused_in_one_line(land):
    evaluator = LandscapeEvaluator(land, seed=0)
    full = make_space("tiles", TINY, SYMBOLIC_CPU)
    outside = next(c for c in full.sample_many(np.random.default_rng(0), 50) if c not in land)
    with pytest.raises(NotInLandscape) as err:
        evaluator.evaluate([land.configs[0], outside])
    assert isinstance(err.value, NotMeasured) and isinstance(err.value, TensorgymError)
    assert "outside the landscape's bounded space" in str(err.value) and "\n" not in str(err.value)
    assert evaluator.lookup(outside) is None
    with pytest.raises(NotInLandscape, match="not a Config"):
        evaluator.evaluate([{"i": [1, 1, 1, 8]}])


def test_partial_landscapes_name_what_is_missing():
    from test_landscape_data import filled_database, synthetic_records
    from tensorgym.landscape import export_landscape

    space = tiny_space()
    records = synthetic_records(space)
    with filled_database(space, records[:-1]) as db:
        partial = export_landscape(db, space, llvm_version="test", allow_partial=True)
    with pytest.raises(NotInLandscape, match="not measured in this partial landscape"):
        LandscapeEvaluator(partial).evaluate([records[-1].config])


def test_the_space_must_be_the_landscapes(land):
    assert LandscapeEvaluator(land, space=tiny_space()).space.configs() == list(land.configs)
    with pytest.raises(LandscapeError, match="not the landscape's"):
        LandscapeEvaluator(land, space=make_space("tiles", TINY, SYMBOLIC_CPU))
    with pytest.raises(TensorgymError):
        LandscapeEvaluator(land, noise="loud")
    with pytest.raises(TensorgymError):
        LandscapeEvaluator(land, clock="wall")
    with pytest.raises(TensorgymError):
        LandscapeEvaluator(land, build_workers=0)
    with pytest.raises(TensorgymError):
        LandscapeEvaluator(land, seed="one")


def test_scores_are_the_whole_table(land):
    evaluator = LandscapeEvaluator(land, seed=0)
    assert evaluator.scores.shape == (len(land),) and not evaluator.scores.flags.writeable
    np.testing.assert_array_equal(evaluator.scores, land.scores)
    drawn = evaluator.drawn_scores
    for row in (0, 7, 50):
        assert drawn[row] == pytest.approx(evaluator.evaluate([land.configs[row]])[0].score)
        assert evaluator.index_of(land.configs[row]) == row
    assert evaluator.configs == land.configs


def test_it_loads_files_and_never_imports_tvm(tmp_path, land):
    path = land.save(tmp_path / "tiny-tiles.json.gz")
    code = ("import sys\nimport tensorgym.landscape.evaluator as m\n"
            f"e = m.LandscapeEvaluator({str(path)!r}, seed=0)\n"
            "records = e.evaluate(list(e.configs))\nassert len(records) == 144\n"
            "assert 'tvm' not in sys.modules, 'tvm was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
