"""Datasets: the shape prior, prior-guided sampling, the build (resumable), export through pandas, stats."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import SyntheticMeasurer, smooth_gflops

from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.dataset.build import build_dataset, plan_tasks
from tensorgym.dataset.export import dataset_frame, export_dataset
from tensorgym.dataset.priors import ShapePrior, load_table
from tensorgym.dataset.stats import dataset_stats
from tensorgym.errors import InvalidArgumentError
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu
from tensorgym.workloads import Workload, conv2d, matmul

TINY = [matmul(32, 48, 64, name="mm"), conv2d(1, 8, 10, 10, 16, 3, 3, name="conv")]


# -- the prior ------------------------------------------------------------------------------------------
def test_every_compatible_row_is_the_tensorgym_workload_it_names():
    table = load_table()
    assert table["provenance"]["models"]["ResNet-50"]["reference"].startswith("K. He")
    rows = [r for r in table["shapes"] if r["tensorgym_compatible"]]
    assert len(rows) == 183
    for row in rows:
        params = {k: row[k] for k in ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")} \
            if row["op"] == "conv2d" else {k: row[k] for k in ("M", "N", "K")}
        wl = Workload.from_json({"op": row["op"], **params})
        assert wl.key == row["tensorgym_key"] and wl.flops == row["flops"]


def test_suite_layers_and_the_real_models_they_occur_in():
    prior = ShapePrior()
    for layer in SUITES["ResNet-50"].layers:  # all of R0-R12 occur in ResNet-50 (v1)
        assert "ResNet-50" in prior.occurrences(layer), layer.name
    assert "ResNet-18" not in prior.occurrences(SUITES["ResNet-18"]["C2"])  # C2 is ResNet-50's R1
    assert prior.occurrences(SUITES["ResNet-18"]["C2"]) == {"ResNet-50": 1, "ResNet-50-v1.5": 1}
    assert prior.occurrences(SUITES["YOLO-9000"]["Y3"]) == {}  # in the pool as a suite layer, in no table model
    labels = {row.workload.label for row in prior.rows}
    assert "YOLO-9000/Y3" in labels and "ResNet-50/R5" in labels


def test_sampling_follows_the_weights_and_gives_distinct_tasks():
    prior = ShapePrior(ops=["matmul"], suites=False)
    p = prior.probabilities()
    rng = np.random.default_rng(0)
    draws = [prior.draw(rng).workload.key for _ in range(4000)]
    heaviest = int(np.argmax(p))
    share = draws.count(prior.rows[heaviest].workload.key) / len(draws)
    assert share == pytest.approx(p[heaviest], abs=0.03)
    tasks = prior.sample(20, np.random.default_rng(1))
    assert len({t.key for t in tasks}) == 20
    assert [t.key for t in prior.sample(20, np.random.default_rng(1))] == [t.key for t in tasks]
    assert len(prior.sample(10_000, rng)) == len(prior)  # no more than the prior holds


def test_prior_filters_and_bad_input():
    conv = ShapePrior(ops=["conv2d"], max_gflop=0.5)
    assert all(r.workload.op == "conv2d" and r.workload.gflop <= 0.5 for r in conv.rows)
    held_out = ShapePrior(exclude_models=["VGG-16"], suites=False)
    assert all(set(r.models) != {"VGG-16"} for r in held_out.rows)
    with pytest.raises(InvalidArgumentError, match="unknown model"):
        ShapePrior(exclude_models=["AlexNet"])
    with pytest.raises(InvalidArgumentError, match="ops"):
        ShapePrior(ops=["conv3d"])
    with pytest.raises(InvalidArgumentError, match="weights"):
        ShapePrior(weights="popularity")


def test_plan_puts_included_layers_first_and_does_not_repeat_them():
    r5 = SUITES["ResNet-50"]["R5"]
    plan = plan_tasks(10, include=[r5], seed=3)
    assert plan[0] is r5 and len(plan) == 11 and len({w.key for w in plan}) == 11
    assert [w.key for w in plan_tasks(10, include=[r5], seed=3)] == [w.key for w in plan]


# -- the build ---------------------------------------------------------------------------------------------
def test_build_fills_every_layer_and_resumes_after_an_interruption(tmp_path):
    with Database(tmp_path / "data.db") as db:
        with pytest.raises(KeyboardInterrupt):
            build_dataset(TINY, db, per_task=8, hop_share=0.5,
                          measurer=SyntheticMeasurer(smooth_gflops, interrupt_after=11), progress=False)
        assert len(db) == 11  # everything measured before the interruption is stored
        again = SyntheticMeasurer(smooth_gflops)
        outcomes = build_dataset(TINY, db, per_task=8, hop_share=0.5, measurer=again, progress=False)
        assert [o.records for o in outcomes] == [8, 8] and len(db) == 16
        assert len(again.measured) == 5  # only what was missing; nothing measured twice
        assert outcomes[0].skipped and not outcomes[1].skipped
        third = SyntheticMeasurer(smooth_gflops)
        assert all(o.skipped for o in build_dataset(TINY, db, per_task=8, measurer=third, progress=False))
        assert third.measured == []


def test_hop_walks_give_replay_start_states(tmp_path):
    with Database(tmp_path / "data.db") as db:
        build_dataset(TINY[:1], db, per_task=12, hop_share=0.0, measurer=SyntheticMeasurer(smooth_gflops),
                      progress=False)
        ga_only = dataset_stats(db).layers[0].replay_starts
    with Database(tmp_path / "hops.db") as db:
        build_dataset(TINY[:1], db, per_task=12, hop_share=0.5, measurer=SyntheticMeasurer(smooth_gflops),
                      progress=False)
        stats = dataset_stats(db)
    layer = stats.layers[0]
    assert layer.records == 12 and layer.ok == 12 and layer.best_gflops > 0
    assert layer.replay_starts >= 5 > ga_only


def test_build_rejects_bad_settings(tmp_path):
    with Database(tmp_path / "x.db") as db:
        for kwargs in ({"per_task": 0}, {"hop_share": 1.5}):
            with pytest.raises(InvalidArgumentError):
                build_dataset(TINY, db, measurer=SyntheticMeasurer(smooth_gflops), progress=False, **kwargs)
        with pytest.raises(InvalidArgumentError, match="no layer"):
            build_dataset([], db, measurer=SyntheticMeasurer(smooth_gflops), progress=False)


@pytest.mark.slow
def test_build_measures_real_kernels(tmp_path):
    with Database(tmp_path / "real.db") as db:
        outcomes = build_dataset(TINY, db, per_task=8, hop_share=0.5, progress=False)
        assert [o.records for o in outcomes] == [8, 8] and all(o.best_gflops > 0 for o in outcomes)


# -- export and stats --------------------------------------------------------------------------------------
@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "data.db"
    with Database(path) as db:
        build_dataset(TINY, db, per_task=8, hop_share=0.5, measurer=SyntheticMeasurer(smooth_gflops), progress=False)
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_round_trips_through_pandas(dataset, tmp_path, fmt):
    import pandas as pd

    out = tmp_path / f"data.{fmt}"
    with Database(dataset) as db:
        assert export_dataset(db, out) == 16
        frame = dataset_frame(db)
    back = pd.read_parquet(out) if fmt == "parquet" else pd.read_csv(out)
    assert len(back) == 16 and set(frame.columns) == set(back.columns)
    row = back.sort_values("record_id").iloc[0]
    first = frame.sort_values("record_id").iloc[0]
    assert json.loads(row["config"]) == json.loads(first["config"])
    assert row["gflops"] == pytest.approx(first["gflops"]) and row["status"] == "ok"
    generic = row["generic"] if fmt == "parquet" else json.loads(row["generic"])
    assert np.allclose(list(generic), first["generic"])
    space = TilesSpace(TINY[0] if row["op"] == "matmul" else TINY[1], local_cpu())
    from tensorgym.config import Config

    assert np.allclose([row[f"af_{n}"] for n in space.feature_names], space.features(Config.from_json(row["config"])))
    assert {"conv2d.C", "matmul.K", "target", "latency_s", "label", "dtype"} <= set(back.columns)


def test_export_errors(tmp_path, dataset):
    with Database(tmp_path / "empty.db") as db:
        with pytest.raises(InvalidArgumentError, match="no record"):
            export_dataset(db, tmp_path / "x.csv")
    with Database(dataset) as db:
        with pytest.raises(InvalidArgumentError, match="format"):
            export_dataset(db, tmp_path / "x.xlsx")


def test_dataset_cli_export_and_stats(dataset, tmp_path, capsys):
    assert main(["dataset", "stats", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "custom/mm" in out and "replay starts" in out and "16 records" in out
    assert main(["dataset", "export", str(dataset), str(tmp_path / "d.csv")]) == 0
    assert "wrote 16 rows" in capsys.readouterr().out
    assert main(["dataset", "stats", str(tmp_path / "missing.db")]) == 2
    assert main(["dataset", "build", "--include", "Conv2d-Nope-*", "--db", str(tmp_path / "n.db")]) == 2
    assert "no environment id matches" in capsys.readouterr().err
    assert not (tmp_path / "n.db").exists()


def test_the_database_lists_the_targets_of_its_records(dataset):
    with Database(dataset) as db:
        targets = db.targets()
    assert targets == {local_cpu().fingerprint: local_cpu()}
