"""``tensorgym landscape measure|export|check`` end to end on a tiny benchmark space of a real layer."""

from __future__ import annotations

import json

import pytest

from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.landscape import Landscape
from tensorgym.record import Status

LAYER = "Conv2d-ResNet18-C7-v0"  # a 1x1 conv: its kernels build and run in a fraction of a second


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A 4-config benchmark space of C7 anchored by a 4-measurement GA search, measured in two chunks."""
    tmp = tmp_path_factory.mktemp("landscape")
    db = tmp / "land.db"
    # The favoured rule: a space of exactly 4 configs (the stratified rule, weighted by the shipped C7 sample,
    # keeps fewer at this size), so that the mechanics below have something to resume.
    common = [LAYER, "--db", str(db), "--max-configs", "4", "--anchor-budget", "4", "--rule", "favoured", "-q"]
    assert main(["landscape", "measure", *common, "--limit", "2"]) == 0  # a first chunk
    assert (tmp / "land-anchor.db").exists()  # the anchoring search went into its own database
    assert main(["landscape", "measure", *common]) == 0  # resumed: the rest
    return tmp, db, common


def test_measure_resumes_and_measures_every_config_once(measured, capsys):
    tmp, db, common = measured
    assert main(["landscape", "measure", *common]) == 0
    assert "0 measured now" in capsys.readouterr().out  # nothing left
    with Database(db, readonly=True) as database:
        records = database.records()
    assert len(records) == len({r.config for r in records}) >= 4
    assert all(r.status is Status.OK for r in records)


def test_the_anchor_search_shows_its_progress_unless_quiet(tmp_path, capsys):
    args = [LAYER, "--db", str(tmp_path / "a.db"), "--max-configs", "2", "--anchor-budget", "2", "--rule", "favoured"]
    assert main(["landscape", "measure", *args, "--limit", "0"]) == 0  # the anchor search only
    assert "anchor ResNet-18/C7" in capsys.readouterr().err  # its progress bar


def test_export_writes_the_landscape_and_t4(measured, capsys):
    tmp, db, common = measured
    out, t4 = tmp / "C7.json.gz", tmp / "C7_T4.json"
    args = [a for a in common if a != "-q"]
    assert main(["landscape", "export", *args, "--out", str(out), "--t4", str(t4)]) == 0
    landscape = Landscape.load(out)
    assert landscape.complete and len(landscape) == len(landscape.space().configs())
    assert landscape.optimum is not None and landscape.metadata.env_id == LAYER
    assert json.loads(t4.read_text())["results"]
    assert "optimum" in capsys.readouterr().out


def test_check_remeasures_live_and_reports_the_rank_agreement(measured, capsys):
    tmp, db, common = measured
    out = tmp / "C7-check.json.gz"
    assert main(["landscape", "export", *[a for a in common if a != "-q"], "--out", str(out)]) == 0
    assert main(["landscape", "check", LAYER, "--landscape", str(out), "--configs", "3", "-q"]) == 0
    text = capsys.readouterr().out
    assert "re-measured live on the landscape's own CPU" in text and "Spearman" in text


def test_paired_measuring_keeps_each_records_ratio_to_the_anchor_and_check_pairs_too(measured, capsys):
    tmp, _, common = measured
    paired_db = tmp / "paired.db"
    args = [*common, "--db", str(paired_db), "--anchor-db", str(tmp / "land-anchor.db")]  # the same anchor
    assert main(["landscape", "measure", *args, "--paired"]) == 0
    assert "paired with the anchor" in capsys.readouterr().err
    with Database(paired_db, readonly=True) as database:
        records = [r for r in database.records() if r.ok]
    states = [dict(r.device_state) for r in records]
    assert records and all("paired_ratio" in s and "reference_drift" in s for s in states)
    assert len({s["reference_s"] for s in states}) == 1  # one session, one scale
    out = tmp / "C7-paired.json.gz"
    assert main(["landscape", "export", *[a for a in args if a != "-q"], "--out", str(out)]) == 0
    assert Landscape.load(out).metadata.notes["paired"]["reference_latency_s"] == pytest.approx(
        states[0]["reference_s"])  # the file says its timings are ratios, and on what scale
    assert main(["landscape", "check", LAYER, "--landscape", str(out), "--configs", "3", "--paired", "-q"]) == 0
    assert "Spearman" in capsys.readouterr().out


def test_export_of_an_unmeasured_layer_is_one_line(tmp_path, capsys):
    code = main(["landscape", "export", LAYER, "--db", str(tmp_path / "none.db"), "--anchor-budget", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "landscape measure" in err


def test_rounds_measure_each_config_again_into_its_own_database_and_export_takes_their_median(measured, capsys):
    tmp, db, common = measured
    args = [*common, "--rounds", "2"]
    assert main(["landscape", "measure", *args, "--limit", "1"]) == 0  # round 1 is complete: round 2 starts
    assert main(["landscape", "measure", *args]) == 0  # resumed
    out = capsys.readouterr().out
    assert "round 2/2" in out and "complete" in out.splitlines()[-1]
    second = tmp / "land-round2.db"
    with Database(db, readonly=True) as a, Database(second, readonly=True) as b:
        first = {r.config: r for r in a.records()}
        again = {r.config: r for r in b.records()}
    assert set(again) == set(first)  # every config measured a second time
    land_path = tmp / "C7-rounds.json.gz"
    assert main(["landscape", "export", *[a for a in args if a != "-q"], "--out", str(land_path)]) == 0
    land = Landscape.load(land_path)
    assert land.metadata.protocol["rounds"] == 2
    for config, record in first.items():
        row = land.index_of(config)
        assert land.latency_s[row] == pytest.approx((record.latency_s + again[config].latency_s) / 2, rel=1e-4)
    assert main(["landscape", "check", LAYER, "--landscape", str(land_path), "--configs", "3", "--rounds", "2",
                 "-q"]) == 0
    text = capsys.readouterr().out
    assert "(2 rounds each, median)" in text and "(round 1 alone: " in text
    # The landscape file names its own space: the rounds export again without the anchor's database.
    again_path = tmp / "C7-again.json.gz"
    assert main(["landscape", "export", str(land_path), "--db", str(db), "--rounds", "2", "--anchor-db",
                 str(tmp / "absent-anchor.db"), "--out", str(again_path)]) == 0
    again_land = Landscape.load(again_path)
    assert not (tmp / "absent-anchor.db").exists()
    assert list(again_land.latency_s) == list(land.latency_s) and again_land.metadata.notes == land.metadata.notes


def test_export_of_rounds_not_measured_and_zero_rounds_are_one_line(measured, capsys):
    tmp, db, common = measured
    code = main(["landscape", "export", *[a for a in common if a != "-q"], "--rounds", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "are not measured" in err and "--rounds 5" in err
    assert main(["landscape", "measure", *common, "--rounds", "0"]) == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err


def test_sample_measures_uniform_configs_of_the_whole_space_and_resumes(tmp_path, capsys):
    from tensorgym.catalog import make_space
    from tensorgym.envs.registration import workload_of
    from tensorgym.landscape.measuring import sample_order
    from tensorgym.target import resolve_target

    db = tmp_path / "sample.db"
    path = tmp_path / "C7-sample.json.gz"
    args = ["landscape", "sample", LAYER, "--db", str(db), "--configs", "5", "--seed", "3", "--out", str(path), "-q"]
    assert main([*args, "--limit", "2"]) == 0  # a first chunk
    assert "3 configs still to measure" in capsys.readouterr().out
    assert main(args) == 0
    assert "3 measured now" in capsys.readouterr().out and main(args) == 0
    out = capsys.readouterr().out
    assert "sample: 0 measured now" in out and "5 held before; complete" in out
    space = make_space("tiles", workload_of(LAYER), resolve_target("llvm"))
    drawn = sample_order(space, 5, 3)
    assert len(set(drawn)) == 5 and sample_order(space, 5, 3) == drawn  # the same draw each time
    with Database(db, readonly=True) as database:
        records = database.records()
    assert {r.config for r in records} == set(drawn)  # the whole space's draw, not the benchmark sub-space's
    sample = Landscape.load(path)  # written once complete, in the landscape file format
    assert list(sample.configs) == drawn and sample.metadata.notes["sample"]["seed"] == 3
    assert sample.metadata.env_id == LAYER and len(sample.scores) == 5


def test_sample_refuses_bad_counts_in_one_line(tmp_path, capsys):
    assert main(["landscape", "sample", LAYER, "--db", str(tmp_path / "s.db"), "--configs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--configs" in err


@pytest.mark.needs_isa("avx2", "fma")
def test_a_cpu_without_landscapes_tunes_on_another_cpus_and_says_so_in_one_line():
    import os
    import subprocess
    import sys

    from tensorgym.landscape import shipped_landscapes

    shipped = sorted({s.cpu for s in shipped_landscapes()})
    env = {**os.environ, "TENSORGYM_CPU": "x86-64-v3"}  # a restricted CPU: never a folder with landscapes
    done = subprocess.run([sys.executable, "-c", "import sys; from tensorgym.cli import main; sys.exit(main())",
                           "tune", "Conv2d-ResNet-R5-v0", "--backend", "landscape", "--budget", "4", "-q"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and any(cpu in notes[0] for cpu in shipped) and "--landscape CPU" in notes[0]
    assert "on the landscape of" in done.stdout


def test_tune_on_a_landscape_refuses_a_database_it_would_not_write(tmp_path, capsys):
    db = tmp_path / "never.db"
    assert main(["tune", LAYER, "--backend", "landscape", "--db", str(db), "--budget", "4", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "drop --db" in err and not db.exists()


def test_list_names_every_shipped_landscape_with_its_cpu_and_fidelity(capsys):
    from tensorgym.landscape import shipped_landscapes

    assert main(["landscape", "list"]) == 0
    out = capsys.readouterr().out
    for shipped in shipped_landscapes():
        assert any(shipped.cpu in line and f" {shipped.layer} " in line and shipped.space in line
                   for line in out.splitlines()), shipped
    rows = [line for line in out.splitlines() if " R5 " in line and " tiles " in line]
    assert rows and all(line.count(" / ") == 4 for line in rows)  # its profile and its full-space sample's


def test_thin_writes_the_narrower_landscape_and_says_what_it_dropped(tmp_path, capsys):
    from test_fidelity import _graded_landscape, _speed

    land = _graded_landscape(_speed)
    source, sample = land.save(tmp_path / "tiny.json.gz"), land.narrowed({"i.3": (1, 2)}).save(tmp_path / "s.json.gz")
    assert main(["landscape", "thin", str(source), "--sample", str(sample), "--out", str(tmp_path / "t.json.gz")]) == 0
    out = capsys.readouterr().out
    thin = Landscape.load(tmp_path / "t.json.gz")
    assert "drop i.3 = " in out and f"{len(thin)} configs" in out and len(thin) < len(land)
    assert thin.metadata.notes["thinned"] and thin.metadata.notes["configs_before_thinning"] == len(land)
    assert Landscape.load(source).configs == land.configs  # --out: the source is left as it was
    assert main(["landscape", "thin", str(sample), "--sample", str(sample)]) == 0  # within already: nothing to write
    assert "nothing to drop" in capsys.readouterr().out
    assert main(["landscape", "thin", str(source), "--sample", str(tmp_path / "none.json.gz")]) == 2
    assert "no full-space sample" in capsys.readouterr().err
