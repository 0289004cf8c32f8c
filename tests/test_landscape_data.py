"""Landscapes as data: the file format, export from a database, the T4 format, shipped files and CPU folders.

Small synthetic landscapes: a bounded tiles space of a tiny matmul on a constructed Zen 4, whose
records are made by hand (no kernel is compiled or timed).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fakes import SYMBOLIC_CPU
from tensorgym.catalog import make_space
from tensorgym.database import Database
from tensorgym.errors import TensorgymError
from tensorgym.evaluator import NotMeasured
from tensorgym.landscape import (
    Landscape, LandscapeError, LandscapeIncomplete, LandscapeNotFound, NotInLandscape, another_cpu_notice, cpu_folder,
    export_landscape, find_landscape, shipped_env_ids, shipped_landscapes,
)
from tensorgym.landscape.export import combine_rounds, t4_document, write_t4
from tensorgym.landscape.parameters import ParameterIndex, config_from_flat, flat_configuration
from tensorgym.landscape.file import MAX_SAMPLES, LandscapeMetadata
from tensorgym.landscape.shipped import landscape_filename, layer_name
from tensorgym.record import Record, Status
from tensorgym.suites import all_suite_workloads
from tensorgym.target import native_cpu, restricted_cpu
from tensorgym.workloads import matmul

TINY = matmul(8, 16, 8, name="tiny")
BOUNDS = {"i.1": (1, 2), "i.2": (1,), "i.3": (1, 2, 4), "j.1": (1, 2), "j.2": (1,), "j.3": (8, 16), "k.1": (1, 4),
          "unroll": (0, 16)}  # 144 configs


def tiny_space(bounds=BOUNDS):
    return make_space("tiles", TINY, SYMBOLIC_CPU, bounds=bounds)


def synthetic_records(space, seed: int = 0) -> list[Record]:
    """A record per config: most correct with 3-10 noisy samples, some failed, one with 40 samples, one short."""
    rng = np.random.default_rng(seed)
    wl = space.workload
    out = []
    for i, config in enumerate(space.configs()):
        build_s = float(0.2 + 0.3 * rng.random())
        common = dict(workload=wl.key, target=space.target.fingerprint, space=space.name, config=config,
                      build_s=build_s, created=time.time() - 1000 + i)
        if i % 13 == 5:
            out.append(Record(status=Status.BUILD_ERROR, error="build: boom\ntraceback", wall_s=build_s / 2,
                              **common))
            continue
        if i % 17 == 3:
            out.append(Record(status=Status.WRONG_RESULT, error="max error 0.5", run_s=0.05,
                              wall_s=build_s / 2 + 0.05, **common))
            continue
        base = 1e-6 * (1.0 + 4.0 * rng.random())
        count = 40 if i == 0 else (1 if i == 1 else int(rng.integers(3, 11)))
        samples = tuple(float(s) for s in base * (1.0 + 0.05 * rng.standard_normal(count)).clip(0.5))
        median = float(np.median(samples))
        run_s = 0.1 + 0.02 * count
        out.append(Record(status=Status.OK, latency_s=median, latency_cv=float(np.std(samples) / np.mean(samples)),
                          samples=samples, number=100, gflops=wl.gflops(median), run_s=run_s,
                          wall_s=build_s / 2 + run_s, timing="short" if count == 1 else "full",
                          contention=0.0 if i % 2 else None, **common))
    return out


def filled_database(space, records=None) -> Database:
    db = Database(":memory:")
    db.register(space.workload, space.target)
    for record in records if records is not None else synthetic_records(space):
        db.commit(record)
    return db


def synthetic_landscape(space=None, **kwargs) -> Landscape:
    space = space if space is not None else tiny_space()
    with filled_database(space) as db:
        return export_landscape(db, space, llvm_version="test", **kwargs)


# -- the file -----------------------------------------------------------------------------------------------------
def test_round_trip_keeps_every_column_and_the_metadata(tmp_path):
    land = synthetic_landscape()
    path = land.save(tmp_path / "tiny-tiles.json.gz")
    again = Landscape.load(path)
    assert again.metadata == land.metadata
    assert again.configs == land.configs and again.status == land.status
    for name in ("latency_s", "latency_cv", "sample_count", "number", "gflops", "build_s", "run_s", "wall_s",
                 "contention"):
        np.testing.assert_array_equal(getattr(again, name), getattr(land, name), err_msg=name)
    assert again.samples == land.samples and again.timing == land.timing and again.error == land.error
    assert again.records() == land.records()
    # The same landscape gives the same bytes (no time stamp in the gzip header).
    assert again.save(tmp_path / "copy.json.gz").read_bytes() == path.read_bytes()


def test_rows_hold_what_was_measured():
    space = tiny_space()
    records = {r.config: r for r in synthetic_records(space)}
    land = synthetic_landscape(space)
    assert land.configs == tuple(space.configs())  # the space's own order
    for row, config in enumerate(land.configs):
        live, kept = records[config], land.record(row)
        assert kept.status == live.status and kept.timing == live.timing and kept.config == config
        assert kept.build_s == pytest.approx(live.build_s, rel=1e-5)
        assert kept.wall_s == pytest.approx(live.wall_s, rel=1e-5)
        assert kept.error == live.error.splitlines()[0] if live.error else kept.error == ""
        if live.ok:
            assert kept.latency_s == pytest.approx(live.latency_s, rel=1e-5)
            assert kept.gflops == pytest.approx(live.gflops, rel=1e-5)
            assert land.sample_count[row] == len(live.samples)
        else:
            assert kept.latency_s is None and kept.gflops is None and land.scores[row] == 0.0


def test_many_samples_are_kept_as_quantiles():
    land = synthetic_landscape()
    row = 0  # 40 samples were taken
    assert land.sample_count[row] == 40 and len(land.samples[row]) == MAX_SAMPLES
    assert list(land.samples[row]) == sorted(land.samples[row])
    assert len(land.samples[1]) == 1 and land.timing[1] == "short"


def test_optimum_top_fraction_and_index():
    land = synthetic_landscape()
    best = land.optimum
    assert best is not None and best.gflops == pytest.approx(land.scores.max())
    top = land.top_fraction(0.1)
    assert len(top) == int(np.ceil(0.1 * len(land))) and top[0].config == best.config
    assert [r.gflops for r in top] == sorted((r.gflops for r in top), reverse=True)
    assert all(r.ok for r in land.top_fraction(1.0)) and len(land.top_fraction(1.0)) == int(land.ok.sum())
    assert land.index_of(best.config) == int(np.argmax(land.scores))
    assert land.fraction_better(best.gflops) == 0.0
    outside = make_space("tiles", TINY, SYMBOLIC_CPU).sample(np.random.default_rng(0)).replace(unroll=512)
    with pytest.raises(NotInLandscape) as err:
        land.index_of(outside)
    assert isinstance(err.value, NotMeasured) and "\n" not in str(err.value)
    with pytest.raises(LandscapeError):
        land.top_fraction(0)


def test_metadata_is_complete_and_rebuilds_the_exact_space():
    space = tiny_space()
    land = synthetic_landscape(space)
    meta = land.metadata
    assert land.problems() == [] and land.complete
    assert meta.workload_key == TINY.key and meta.workload_label == TINY.label and meta.space == "tiles"
    assert meta.fingerprint == SYMBOLIC_CPU.fingerprint == land.fingerprint
    assert meta.cpu_model == SYMBOLIC_CPU.cpu_model and meta.cores == SYMBOLIC_CPU.num_cores
    assert meta.cpu_flags == SYMBOLIC_CPU.cpu_flags and meta.cpu_folder == cpu_folder(SYMBOLIC_CPU)
    assert meta.tvm_version and meta.llvm_version == "test" and meta.tensorgym_version
    assert meta.protocol["settings"]["min_repeat_ms"] > 0 and meta.date.endswith("+00:00")
    assert meta.measured_from <= meta.measured_to
    assert meta.configs_in_space == len(space.configs()) and meta.env_id is None
    assert meta.space_options == {"bounds": {k: list(v) for k, v in BOUNDS.items()}}
    rebuilt = land.space()
    assert rebuilt.configs() == space.configs() and rebuilt.bounds == space.bounds
    assert land.cpu_label == SYMBOLIC_CPU.label


def test_a_narrowed_landscape_is_the_narrower_space_with_the_same_measurements(tmp_path):
    land = synthetic_landscape()
    narrow = land.narrowed({"i.3": (1, 4), "unroll": (16,)}, notes={"why": "test"})
    space = tiny_space({**BOUNDS, "i.3": (1, 4), "unroll": (16,)})
    assert narrow.configs == tuple(space.configs()) and len(narrow) == 144 * 2 // 3 // 2
    assert narrow.complete and narrow.problems() == []
    assert narrow.metadata.space_options["bounds"]["i.3"] == [1, 4] and narrow.metadata.notes["why"] == "test"
    for config in narrow.configs:  # every column of every row is the wider landscape's
        assert narrow.record(narrow.index_of(config)) == land.record(land.index_of(config))
    assert Landscape.load(narrow.save(tmp_path / "narrow.json.gz")).configs == narrow.configs
    with pytest.raises(LandscapeError, match="subset"):
        land.narrowed({"i.3": (3,)})
    with pytest.raises(LandscapeError, match="no coordinate 'z.1'"):
        land.narrowed({"z.1": (1,)})
    with pytest.raises(LandscapeError, match="subset"):
        land.narrowed({"i.3": ()})


def test_the_space_is_rebuilt_without_tvm(tmp_path):
    path = synthetic_landscape().save(tmp_path / "tiny-tiles.json.gz")
    code = (f"import sys; from tensorgym.landscape.file import Landscape; land = Landscape.load({str(path)!r}); "
            "space = land.space(); assert len(space.configs()) == len(land) == 144; "
            "assert 'tvm' not in sys.modules, 'tvm was imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_unreadable_files_are_refused_in_one_line(tmp_path):
    cases = {"not-gzip.json.gz": b"plain text",
             "other.json.gz": gzip.compress(json.dumps({"format": "something"}).encode()),
             "future.json.gz": gzip.compress(json.dumps({"format": "tensorgym-landscape", "version": 99}).encode())}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(LandscapeError) as err:
            Landscape.load(tmp_path / name)
        assert "\n" not in str(err.value) and isinstance(err.value, TensorgymError)
    with pytest.raises(LandscapeError, match="no landscape file"):
        Landscape.load(tmp_path / "missing.json.gz")
    broken = synthetic_landscape().to_json()
    del broken["columns"]["wall_s"]
    (tmp_path / "broken.json.gz").write_bytes(gzip.compress(json.dumps(broken).encode()))
    with pytest.raises(LandscapeError, match="wall_s"):
        Landscape.load(tmp_path / "broken.json.gz")


# -- export -------------------------------------------------------------------------------------------------------
def test_export_refuses_a_partial_space_unless_allowed():
    space = tiny_space()
    records = synthetic_records(space)
    with filled_database(space, records[:-7]) as db:
        with pytest.raises(LandscapeIncomplete) as err:
            export_landscape(db, space, llvm_version="test")
        assert "7 of 144 configs" in str(err.value) and "\n" not in str(err.value)
        partial = export_landscape(db, space, llvm_version="test", allow_partial=True)
    assert len(partial) == 137 and partial.metadata.configs_in_space == 144 and not partial.complete
    assert partial.metadata.notes == {"configs_measured": 137, "complete": False}
    assert any("7 of 144 configs" in p for p in partial.problems())


def test_export_leaves_out_infra_errors_and_other_spaces_configs():
    space = tiny_space()
    records = synthetic_records(space)
    records[3] = dataclasses.replace(records[3], status=Status.INFRA_ERROR, latency_s=None, samples=(), gflops=None)
    wider = make_space("tiles", TINY, SYMBOLIC_CPU)  # the same "tiles" records of configs outside the bounds
    extra = [dataclasses.replace(records[0], config=c) for c in wider.sample_many(np.random.default_rng(1), 20)
             if c not in set(space.configs())]
    with filled_database(space, records + extra) as db:
        with pytest.raises(LandscapeIncomplete, match="1 of 144"):
            export_landscape(db, space, llvm_version="test")
        land = export_landscape(db, space, llvm_version="test", allow_partial=True)
    assert len(land) == 143 and records[3].config not in land
    assert all(space.is_valid(c) for c in land.configs)


def _slowed(records, factor, every=1):
    """``records`` with the correct ones' samples (every ``every``-th) ``factor`` times slower: another round."""
    out = []
    for i, r in enumerate(records):
        if r.ok and i % every == 0:
            samples = tuple(s * factor for s in r.samples)
            r = dataclasses.replace(r, samples=samples, latency_s=r.latency_s * factor, gflops=r.gflops / factor,
                                    timing="full")
        out.append(r)
    return out


def test_export_of_rounds_keeps_each_configs_median_round_and_every_sample():
    space = tiny_space()
    first = synthetic_records(space)
    second = _slowed(first, 3.0, every=2)  # a slowdown that hit half the configs in round 2
    third = _slowed(first, 1.1)
    third[7] = dataclasses.replace(third[7], status=Status.RUNTIME_ERROR, error="segfault", latency_s=None,
                                   samples=(), gflops=None)  # a kernel that failed once is a failed kernel
    with filled_database(space, first) as a, filled_database(space, second) as b, \
            filled_database(space, third) as c:
        land = export_landscape(a, space, llvm_version="test", repeats=[b, c])
        with filled_database(space, third[:-5]) as short:
            with pytest.raises(LandscapeIncomplete, match="5 of 144"):
                export_landscape(a, space, llvm_version="test", repeats=[b, short])
    assert land.metadata.protocol["rounds"] == 3 and "3 rounds" in land.metadata.protocol["summary"]
    for i, r in enumerate(first):
        row = land.index_of(r.config)
        if i == 7 or not r.ok:
            assert not land.ok[row]
            continue
        expected = statistics.median([r.latency_s, second[i].latency_s, third[i].latency_s])
        assert land.latency_s[row] == pytest.approx(expected, rel=1e-5)  # the slowed round never decides it
        assert land.latency_s[row] == pytest.approx(r.latency_s * (1.1 if i % 2 == 0 else 1.0), rel=1e-5)
        assert land.run_s[row] == pytest.approx(r.run_s, rel=1e-5)  # a search pays for one measurement
        kept = min(3 * len(r.samples), MAX_SAMPLES)
        assert land.sample_count[row] == 3 * len(r.samples) and len(land.samples[row]) == kept
    assert first[1].short and second[1].short and not third[1].short
    assert land.record(land.index_of(first[1].config)).timing == "short"  # short in 2 rounds of 3: a bound
    shorter = [dataclasses.replace(first[1], timing="full"), second[1], third[1]]
    assert combine_rounds(shorter).timing == "full"  # short in 1 round of 3


def test_combine_rounds_refuses_records_of_different_configs():
    space = tiny_space()
    records = [r for r in synthetic_records(space) if r.ok][:2]
    with pytest.raises(ValueError, match="different configs"):
        combine_rounds(records)
    assert combine_rounds(records[:1]) == records[0]


def test_export_names_the_suite_env_id_and_takes_the_peak():
    layer = all_suite_workloads()["Matmul-BERT-M0-v0"]
    space = make_space("tiles", layer, SYMBOLIC_CPU, bounds={"i.1": (8,), "i.2": (1,), "i.3": (4,), "j.1": (1,),
                                                             "j.2": (1,), "j.3": (16,), "k.1": (4, 8),
                                                             "unroll": (64,), "cache_write": (1,)})
    land = synthetic_landscape(space, fma_peak_gflops=123.5)
    assert land.metadata.env_id == "Matmul-BERT-M0-v0" and land.metadata.fma_peak_gflops == 123.5
    assert land.metadata.workload_label == "BERT/M0" and len(land) == len(space.configs())


# -- T4 -----------------------------------------------------------------------------------------------------------
def test_t4_document_follows_kernel_tuner_and_the_schema(tmp_path):
    land = synthetic_landscape()
    doc = t4_document(land)
    assert doc["schema_version"] == "1.0.0" and doc["metadata"]["timeunit"] == "milliseconds"
    assert len(doc["results"]) == len(land)
    index = ParameterIndex(land)
    for row, result in enumerate(doc["results"]):
        assert {"configuration", "times", "invalidity", "correctness"} <= set(result)
        assert index.row(result["configuration"]) == row  # the free parameters name the config
        assert all(isinstance(v, int) for v in result["configuration"].values())
        measured = {m["name"]: m["value"] for m in result["measurements"]}
        times = result["times"]
        # The methodology's "all" time keys add up to the wall seconds the tuning clock charges.
        total = sum(times[k] if k != "runtimes" else sum(times[k]) for k in
                    ("compilation", "runtimes", "framework", "search_algorithm", "validation"))
        assert total == pytest.approx(land.wall_s[row] * 1e3, rel=1e-9)
        assert times["benchmark"] == pytest.approx(land.run_s[row] * 1e3)
        if land.ok[row]:
            assert result["invalidity"] == "correct" and measured["time"] == pytest.approx(land.latency_s[row] * 1e3)
            assert measured["GFLOP/s"] == pytest.approx(land.scores[row])
            assert times["runtimes"] == pytest.approx([s * 1e3 for s in land.samples[row]])
        else:
            assert result["invalidity"] in ("compile", "correctness") and isinstance(measured["time"], str)
    path = write_t4(land, tmp_path / "tiny_T4.json")
    assert json.loads(path.read_text()) == doc


def test_t4_file_reads_in_the_autotuning_methodology(tmp_path):
    pytest.importorskip("jsonschema")
    validators = pytest.importorskip("autotuning_methodology.validators")
    stats_module = pytest.importorskip("autotuning_methodology.searchspace_statistics")
    land = synthetic_landscape()
    path = write_t4(land, tmp_path / "tiny_T4.json")
    validators.validate_T4(json.loads(path.read_text()))
    stats = stats_module.SearchspaceStatistics(
        application_name="tiny", device_name="cpu", minimization=True,
        objective_time_keys=["compilation", "runtimes", "framework", "search_algorithm", "validation"],
        objective_performance_keys=["time"], full_search_space_file_path=path)
    assert stats.size == len(land)
    np.testing.assert_allclose(stats.objective_times_total, land.wall_s, rtol=1e-9)  # seconds, as our clock
    valid = ~np.isnan(stats.objective_performances_total)
    np.testing.assert_array_equal(valid, land.ok)
    np.testing.assert_allclose(stats.objective_performances_total[valid], land.latency_s[land.ok] * 1e3)
    assert stats.total_performance_absolute_optimum() == pytest.approx(land.optimum.latency_s * 1e3)


def test_flat_configuration_round_trip():
    config = tiny_space().configs()[7]
    flat = flat_configuration(config)
    assert flat["i.0"] == config["i"][0] and flat["unroll"] == config["unroll"]
    assert config_from_flat(flat) == config


# -- shipped files and CPUs -----------------------------------------------------------------------------------------
def test_cpu_folders_name_model_microarchitecture_isa_and_cores():
    epyc = dataclasses.replace(native_cpu(), cpu_model="AMD EPYC (family 25 model 17)",
                               cpu_flags=SYMBOLIC_CPU.cpu_flags, num_cores=2, profile="", mcpu=None)
    assert cpu_folder(epyc) == "amd-epyc-zen4-avx512-2c"
    assert cpu_folder(restricted_cpu(epyc, "x86-64-v3")) == "amd-epyc-zen4-avx2-x86-64-v3-2c"
    xeon = dataclasses.replace(epyc, cpu_model="Intel(R) Xeon(R) Platinum 8488C (family 6 model 143)", num_cores=8)
    assert cpu_folder(xeon) == "intel-xeon-platinum-8488c-sapphirerapids-avx512-8c"
    unknown = dataclasses.replace(epyc, cpu_model="Hygon C86 (family 24 model 2)")
    assert cpu_folder(unknown) == "hygon-c86-avx512-2c"
    bare = dataclasses.replace(epyc, cpu_model="Some CPU (family 99 model 1)")
    assert cpu_folder(bare) == "some-f99m1-avx512-2c"
    for target in (epyc, xeon, unknown, native_cpu()):
        folder = cpu_folder(target)
        assert folder == folder.lower() and all(ch.isalnum() or ch == "-" for ch in folder)


def test_file_names_tell_layers_and_their_variants_apart():
    r5 = all_suite_workloads()["Conv2d-ResNet-R5-v0"]
    assert layer_name(r5) == "R5" and landscape_filename(r5) == "R5-tiles.json.gz"
    nhwc = dataclasses.replace(r5, layout="NHWC")
    assert layer_name(nhwc).startswith("R5-") and layer_name(nhwc) != "R5"
    assert layer_name(TINY).startswith("tiny-")


def _ship(root: Path, folder: str, env_id: str) -> Path:
    path = root / folder / landscape_filename(all_suite_workloads()[env_id])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")  # find_landscape looks at names only
    return path


def test_find_landscape_gives_this_cpus_else_another_cpus(tmp_path):
    here = cpu_folder(SYMBOLIC_CPU)
    mine = _ship(tmp_path, here, "Conv2d-ResNet-R5-v0")
    theirs = _ship(tmp_path, "intel-xeon-platinum-8488c-sapphirerapids-avx512-8c", "Matmul-BERT-M3-v0")
    assert find_landscape("Conv2d-ResNet-R5-v0", target=SYMBOLIC_CPU, root=tmp_path) == mine
    assert find_landscape(all_suite_workloads()["Conv2d-ResNet-R5-v0"], target=SYMBOLIC_CPU, root=tmp_path) == mine
    # No M3 landscape of this CPU: another CPU's is the benchmark, and says whose it is.
    assert find_landscape("Matmul-BERT-M3-v0", target=SYMBOLIC_CPU, root=tmp_path) == theirs
    assert find_landscape("Matmul-BERT-M3-v0", cpu=theirs.parent.name, target=SYMBOLIC_CPU, root=tmp_path) == theirs
    notice = another_cpu_notice(theirs.parent.name, SYMBOLIC_CPU)
    assert theirs.parent.name in notice and here in notice and "--landscape CPU" in notice and "\n" not in notice
    assert another_cpu_notice(here, SYMBOLIC_CPU) is None
    with pytest.raises(LandscapeNotFound, match="shipped: ") as err:
        find_landscape("Conv2d-YOLO-Y9-v0", target=SYMBOLIC_CPU, root=tmp_path)
    assert "`tensorgym landscape measure Conv2d-YOLO-Y9-v0 --space tiles --db Y9-tiles.db`" in str(err.value)
    with pytest.raises(LandscapeNotFound, match="CPUs with landscapes"):
        find_landscape("Conv2d-ResNet-R5-v0", cpu="no-such-cpu", root=tmp_path)
    with pytest.raises(TensorgymError, match="did you mean"):
        find_landscape("Conv2d-ResNet-R55-v0", root=tmp_path)
    listed = shipped_landscapes(tmp_path)
    assert [(s.cpu, s.layer, s.space) for s in listed] == sorted(
        [(here, "R5", "tiles"), (theirs.parent.name, "M3", "tiles")])
    assert shipped_env_ids(here, root=tmp_path) == ["Conv2d-ResNet-R5-v0"]
    assert shipped_env_ids(theirs.parent.name, root=tmp_path) == ["Matmul-BERT-M3-v0"]
    assert shipped_env_ids(here, space="microkernel", root=tmp_path) == []


def test_every_shipped_landscape_is_complete_and_rebuildable():
    """Passes with no shipped file; checks each one that is there."""
    for shipped in shipped_landscapes():
        land = Landscape.load(shipped.path)
        assert land.problems() == [], f"{shipped.name}: {land.problems()}"
        assert land.complete, shipped.name
        assert land.cpu_folder == shipped.cpu, shipped.name
        assert shipped.path.name == landscape_filename(land.workload, land.space_name), shipped.name
        missing = [name for name in LandscapeMetadata.REQUIRED if getattr(land.metadata, name) in (None, "")]
        assert not missing, f"{shipped.name} lacks {missing}"
        assert land.optimum is not None, shipped.name
