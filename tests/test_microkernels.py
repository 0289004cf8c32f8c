"""The microkernel catalogue: enumeration rules, storage, reuse, calibration."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tensorgym import calibration
from tensorgym.calibration import calibrate, stored_or_quick_catalogue
from tensorgym.spaces.microkernel import catalogue
from tensorgym.spaces.microkernel import (
    Catalogue, CatalogueEntry, CatalogueMissing, EnumerationRules, Microkernel, MicrokernelSpace, catalogue_path,
    enumerate_microkernels, load_catalogue,
)
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu


def _check_paper_limits(mk: Microkernel, rules: EnumerationRules) -> None:
    out, par = mk.vec * mk.h * mk.w, mk.vec * mk.c * mk.r * mk.s
    assert rules.min_out <= out <= rules.max_out
    assert rules.min_total <= out + par <= rules.max_total
    assert all(1 <= v <= rules.max_size for v in (mk.vec, mk.h, mk.w, mk.c))
    assert mk.r in rules.rs_sizes and mk.s in rules.rs_sizes
    assert not (mk.r > 1 and mk.s > 1 and mk.r != mk.s)
    assert out + mk.vec + 1 <= rules.registers  # accumulators + one step's weights + a broadcast


@pytest.mark.parametrize("mode", ["default", "quick", "paper"])
def test_catalogue_respects_register_limits(mode):
    target = local_cpu()
    rules = EnumerationRules.for_target(target, quick=mode == "quick", paper=mode == "paper")
    candidates = enumerate_microkernels(rules)
    assert candidates and len(set(candidates)) == len(candidates)
    for mk in candidates:
        _check_paper_limits(mk, rules)
    # the BLIS-like AVX-512 microkernel of seed 003 and the R5 prototype's are in the default set
    if mode != "quick" and target.vector_registers == 32:
        assert Microkernel(vec=2, h=1, w=12) in candidates
        assert Microkernel(vec=2, h=1, w=14) in candidates


def test_paper_enumeration_count_matches_the_notes():
    """seed 003's constraints enumerate 2043 microkernels (as the paper's rules count them), before the spill rule."""
    rules = EnumerationRules(registers=10_000, rs_sizes=(1, 3, 5, 7), c_sizes=tuple(range(1, 17)))
    assert len(enumerate_microkernels(rules)) == 2043
    spill_free = EnumerationRules(rs_sizes=(1, 3, 5, 7), c_sizes=tuple(range(1, 17)))
    assert 2000 < len(enumerate_microkernels(spill_free)) < 2043


def test_rules_scale_to_a_smaller_register_file():
    avx2 = dataclasses.replace(local_cpu(), cpu_flags=("avx", "avx2", "fma"))
    assert avx2.vector_registers == 16
    rules = EnumerationRules.for_target(avx2)
    candidates = enumerate_microkernels(rules)
    assert candidates
    assert all(mk.live_registers <= 16 and mk.out_registers <= 14 for mk in candidates)


def test_quick_mode_measures_a_small_subset():
    quick = enumerate_microkernels(EnumerationRules.for_target(local_cpu(), quick=True))
    full = set(enumerate_microkernels(EnumerationRules.for_target(local_cpu())))
    assert 0 < len(quick) <= 32
    assert set(quick) <= full


def _fake_catalogue(mode="full", peak=200.0):
    target = local_cpu()
    entries = (
        CatalogueEntry(Microkernel(2, 7), "ok", 190.0, 1e-4),
        CatalogueEntry(Microkernel(2, 8), "ok", 170.0, 1e-4),
        CatalogueEntry(Microkernel(2, 9), "ok", 120.0, 1e-4),
        CatalogueEntry(Microkernel(1, 15), "ok", 165.0, 1e-4),
        CatalogueEntry(Microkernel(3, 5), "build_error", error="boom"),
    )
    return Catalogue(fingerprint=target.fingerprint, target_label=target.label, lanes=target.vector_lanes_fp32,
                     registers=target.vector_registers, peak_gflops=peak, mode=mode,
                     rules=EnumerationRules.for_target(target), entries=entries, threshold=0.8)


def test_kept_classes_and_threshold():
    cat = _fake_catalogue()
    assert set(cat.kept()) == {Microkernel(2, 7), Microkernel(2, 8), Microkernel(1, 15)}  # >= 160 GFLOP/s
    assert set(cat.kept(0.9)) == {Microkernel(2, 7)}
    classes = cat.classes()
    assert classes[(2, 1, 1, 1, 1)] == [Microkernel(2, 7), Microkernel(2, 8)]
    assert classes[(1, 1, 1, 1, 1)] == [Microkernel(1, 15)]
    assert cat.fraction(Microkernel(2, 7)) == pytest.approx(0.95)
    assert cat.fraction(Microkernel(3, 5)) is None
    assert cat.ranked()[0] == Microkernel(2, 7)


def test_catalogue_json_round_trip(tmp_path):
    cat = _fake_catalogue()
    path = tmp_path / "c.json"
    cat.save(path)
    again = Catalogue.load(path)
    assert again.entries == cat.entries and again.rules == cat.rules and again.peak_gflops == cat.peak_gflops
    assert json.loads(path.read_text())["fingerprint"] == local_cpu().fingerprint


def test_missing_catalogue_says_how_to_calibrate(tmp_path):
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        load_catalogue(cache_dir=tmp_path)


def test_cache_dir_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(catalogue.CACHE_ENV, str(tmp_path))
    assert catalogue_path() == tmp_path / "microkernels" / f"{local_cpu().fingerprint}.json"
    _fake_catalogue().save(catalogue_path())
    assert load_catalogue().peak_gflops == 200.0


def test_stored_calibration_is_reused_not_remeasured(tmp_path, monkeypatch):
    def must_not_measure(*args, **kwargs):
        raise AssertionError("calibrate measured although this machine has a stored catalogue")

    monkeypatch.setattr(calibration, "_measure_all", must_not_measure)
    _fake_catalogue(mode="full").save(catalogue_path(cache_dir=tmp_path))
    for quick in (False, True):
        result = calibrate(quick=quick, cache_dir=tmp_path, progress=False)
        assert result.reused and result.measured == 0
        assert result.catalogue.peak_gflops == 200.0
    # a quick catalogue answers --quick but not a full calibration
    _fake_catalogue(mode="quick").save(catalogue_path(cache_dir=tmp_path))
    assert calibrate(quick=True, cache_dir=tmp_path, progress=False).reused
    with pytest.raises(AssertionError, match="stored catalogue"):
        calibrate(quick=False, cache_dir=tmp_path, progress=False)


def _quick_measurement(asked: list):
    """A stand-in for the measuring part of a calibration: every candidate at 90 % of a 100 GFLOP/s peak."""

    def measure(target, candidates, protocol, progress, chunk, timeout, threshold):
        asked.append(len(candidates))
        return [CatalogueEntry(mk, "ok", 90.0) for mk in candidates], 100.0

    return measure


def test_the_space_only_loads_a_catalogue(tmp_path, monkeypatch):
    """Building a space never compiles or times: without a stored catalogue it says which command to run."""
    monkeypatch.setattr(calibration, "_measure_all", lambda *a, **k: pytest.fail("the space measured"))
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        MicrokernelSpace(SUITES["ResNet-50"]["R5"], local_cpu(), cache_dir=tmp_path)
    with pytest.raises(TypeError, match="auto_calibrate"):  # the first-use calibration is the env's, not the space's
        MicrokernelSpace(SUITES["ResNet-50"]["R5"], local_cpu(), cache_dir=tmp_path, auto_calibrate=True)


def test_first_use_calibrates_a_quick_catalogue_once(tmp_path, monkeypatch, caplog):
    asked: list[int] = []
    monkeypatch.setattr(calibration, "_measure_all", _quick_measurement(asked))
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        stored_or_quick_catalogue(cache_dir=tmp_path, auto_calibrate=False)
    assert asked == []
    cat = stored_or_quick_catalogue(cache_dir=tmp_path, progress=False)
    quick = EnumerationRules.for_target(local_cpu(), quick=True)
    assert asked == [len(enumerate_microkernels(quick))]  # the quick enumeration, measured once
    assert cat.mode == "quick" and cat.peak_gflops == 100.0
    assert "tensorgym microkernels calibrate" in caplog.text  # the note on the full calibration
    assert stored_or_quick_catalogue(cache_dir=tmp_path).entries == cat.entries  # stored now: nothing measured
    assert len(asked) == 1
    space = MicrokernelSpace(SUITES["ResNet-50"]["R5"], local_cpu(), cache_dir=tmp_path)
    assert space.peak_gflops == 100.0 and space.source == "catalogue"


def test_the_env_calibrates_on_first_use(tmp_path, monkeypatch):
    from tensorgym.envs.microkernel_env import MicrokernelEnv

    asked: list[int] = []
    monkeypatch.setattr(calibration, "_measure_all", _quick_measurement(asked))
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        MicrokernelEnv(SUITES["ResNet-50"]["R5"], cache_dir=tmp_path, db=tmp_path / "r.db", auto_calibrate=False)
    assert asked == []
    env = MicrokernelEnv(SUITES["ResNet-50"]["R5"], cache_dir=tmp_path, db=tmp_path / "r.db")
    try:
        assert len(asked) == 1 and env.search_space.peak_gflops == 100.0 and env.reward_scale == 100.0
    finally:
        env.close()
    # a workload the space refuses is refused before anything is measured
    with pytest.raises(ValueError, match="float32"):
        MicrokernelEnv(SUITES["ResNet-50"]["R5"].with_dtype("int8"), cache_dir=tmp_path / "none",
                       db=tmp_path / "r.db")
    assert len(asked) == 1


def test_calibrate_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="threshold"):
        calibrate(threshold=1.5, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="quick or paper"):
        calibrate(quick=True, paper=True, cache_dir=tmp_path)


@pytest.mark.slow
def test_real_calibration_then_reuse(tmp_path):
    """Measures a 3-microkernel catalogue for real (peak included), then reuses it."""
    target = local_cpu()
    rules = dataclasses.replace(EnumerationRules.for_target(target, quick=True), w_sizes=(14,), max_vec=2)
    first = calibrate(rules=rules, cache_dir=tmp_path, progress=False)
    assert not first.reused and first.measured == len(enumerate_microkernels(rules)) >= 2
    cat = first.catalogue
    assert cat.peak_gflops > 0 and cat.mode == "custom"
    assert all(e.status == "ok" and 0 < e.gflops <= 1.05 * cat.peak_gflops for e in cat.entries)
    second = calibrate(rules=rules, cache_dir=tmp_path, progress=False)
    assert second.reused and second.measured == 0
    assert second.catalogue.entries == cat.entries


def test_cli_commands(tmp_path, capsys, monkeypatch):
    import argparse

    from tensorgym.cli.microkernels import add_parser, cmd_show

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["microkernels", "show", "--cache-dir", str(tmp_path)])
    with pytest.raises(CatalogueMissing, match="calibrate"):  # nothing calibrated yet
        args.func(args)

    _fake_catalogue().save(catalogue_path(cache_dir=tmp_path))
    assert cmd_show(args) == 0
    text = capsys.readouterr().out
    assert "200.0 GFLOP/s" in text and "95.0 %" in text and "h in [7, 8]" in text

    monkeypatch.setattr(calibration, "_measure_all", lambda *a, **k: pytest.fail("measured"))
    args = parser.parse_args(["microkernels", "calibrate", "--quick", "--cache-dir", str(tmp_path), "-q"])
    assert args.func(args) == 0
    assert "reusing" in capsys.readouterr().out


def test_the_peak_kernel_keeps_its_chains_in_the_register_file():
    """24 FMA chains in 16 registers spill (on an AVX2 CPU they measured half its peak): the peak kernel has as
    many chains as the register file holds; the AVX-512 kernel (and its records' key) is unchanged."""
    from tensorgym.target import constructed_cpu

    avx2, avx512 = calibration.PeakKernel(constructed_cpu("haswell")), calibration.PeakKernel(constructed_cpu("znver4"))
    assert (avx2.workload.chains, avx2.workload.lanes) == (12, 8)
    assert (avx512.workload.chains, avx512.workload.lanes) == (24, 16)
    assert avx2.workload.chains + calibration.PEAK_SPARE_REGISTERS <= 16


def test_the_peak_kernel_s_variants_are_checked_in_one_line():
    from tensorgym.errors import InvalidArgumentError, InvalidTypeError
    from tensorgym.target import constructed_cpu

    avx2 = constructed_cpu("haswell")
    variant = calibration.PeakKernel(avx2, iterations=1000, chains=8)
    assert (variant.workload.iterations, variant.workload.chains) == (1000, 8)
    with pytest.raises(InvalidArgumentError, match=r"^chains must be <= 12, got 24$"):
        calibration.PeakKernel(avx2, chains=24)  # more chains than AVX2's 16 registers hold
    with pytest.raises(InvalidArgumentError, match="iterations must be >= 1"):
        calibration.PeakKernel(avx2, iterations=0)
    with pytest.raises(InvalidTypeError, match="chains must be an integer"):
        calibration.PeakKernel(avx2, chains=8.0)


def test_a_microkernel_is_parsed_from_its_sizes():
    assert Microkernel.parse("2,1,7") == Microkernel(2, 1, 7, 1, 1, 1)
    assert Microkernel.parse("1,2,3,4,1,3") == Microkernel(1, 2, 3, 4, 1, 3)
    for bad in ("2,1", "2,x,7", "1,2,3,4,5,6,7", ""):
        with pytest.raises(ValueError, match="vec,h,w"):
            Microkernel.parse(bad)
    with pytest.raises(ValueError, match="positive integer"):
        Microkernel.parse("2,0,7")


def test_time_measures_chosen_microkernels_the_rules_allow_or_not(capsys):
    from tensorgym.cli import main

    # One the register rules allow on any x86 target and one past every register file (40 accumulators).
    assert main(["microkernels", "time", "1,1,4", "1,5,8", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    regs = local_cpu().vector_registers
    assert "fp32 FMA peak" in out and "round 1" in out and "round 2" not in out
    rows = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines() if line.startswith("vec")}
    assert f"6 of {regs}" in rows["vec1 h1"] and f"42 of {regs}" in rows["vec1 h5"]
    assert rows["vec1 h5"].split()[9] == "no"  # not enumerated by the calibration: too many live registers
    assert all("%" in line for line in rows.values())  # each measured, as a share of the round's peak


def test_time_rejects_bad_input_in_one_line(capsys):
    from tensorgym.calibration import time_microkernels
    from tensorgym.cli import main

    with pytest.raises(SystemExit):
        main(["microkernels", "time", "2,1"])
    assert "vec,h,w[,c,r,s]" in capsys.readouterr().err
    assert main(["microkernels", "time", "1,1,4", "--rounds", "0"]) == 2
    assert "rounds must be >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no microkernel"):
        time_microkernels([])
