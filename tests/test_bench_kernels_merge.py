"""``bench/bench_kernels.py --merge``: one report from a benchmark run in chunks, one layer per run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench_scripts import bench_script
from fakes import SYMBOLIC_CPU
from tensorgym.suites import all_suite_workloads

# A best kernel timed against a vendor in one process, as bench_kernels keeps it (figures invented).
PAIRED = {"space": "tiles", "config": {"a": 1}, "pairs": 30, "speedup": 0.97, "spread": 0.012,
          "speedup_apart": 0.95, "vendor_drift": 0.004, "steal": 0.0}


@pytest.fixture(scope="module")
def bench():
    return bench_script("bench_kernels")


def _run(layer: str, kernel: float, vendor: float, *, fingerprint="f00d", busy=False) -> dict:
    """A one-layer run's JSON as bench_kernels writes it (figures invented; nothing here is timed)."""
    workload = all_suite_workloads()[layer]
    kernels = [{"combo": "microkernel-in-kernel", "budget": b, "weights": "per call", "first_gflops": kernel * f,
                "retimed": kernel * f, "retimed_busy": busy} for b, f in ((64, 0.9), (256, 1.0))]
    vendors = [{"library": "oneDNN", "layout": "NHWC", "weights": "per call", "gflops": vendor, "retimed": vendor,
                "busy": False}]
    target = {**dataclasses.replace(SYMBOLIC_CPU, cpu_model="test CPU", num_cores=2, profile=None).to_json(),
              "fingerprint": fingerprint}
    return {"target": target,
            "settings": {"budgets": [64, 256]}, "peak_gflops": 200.0,
            "layers": {layer: {"kernels": kernels, "vendors": vendors, "workload": workload.to_json()}}}


def test_merge_prints_every_layer_and_the_geomean_of_the_best_at_the_top_budget(bench, tmp_path, capsys):
    paths = []
    for name, kernel, vendor in (("Conv2d-ResNet-R5-v0", 180.0, 200.0), ("Matmul-BERT-M3-v0", 220.0, 200.0)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_run(name, kernel, vendor)))
        paths.append(str(path))
    out = tmp_path / "merged.json"
    assert bench.main(["--merge", *paths, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Conv2d-ResNet-R5-v0" in text and "Matmul-BERT-M3-v0" in text and "test CPU x2" in text
    # A share of the peak counts only the taps that read the input: 95.3 % of R5's FLOPs, all of M3's.
    assert "0.90x; 86 % of peak" in text and "1.10x; 110 % of peak" in text
    assert text.count("% peak: of the multiply-adds that read the input (0.953 of the layer's FLOPs") == 1
    geomean = (0.9 * 1.1) ** 0.5
    assert f"geomean over 2 layer(s) of best tensorgym / vendor's best: {geomean:.2f}x" in text
    assert json.loads(out.read_text())["geomean_vs_vendor_best"] == pytest.approx(geomean)


def test_merge_refuses_runs_of_different_targets_and_withholds_busy_ratios(bench, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_run("Conv2d-ResNet-R5-v0", 180.0, 200.0)))
    b.write_text(json.dumps(_run("Matmul-BERT-M3-v0", 220.0, 200.0, fingerprint="beef")))
    assert bench.main(["--merge", str(a), str(b)]) == 2
    assert "different targets" in capsys.readouterr().err
    b.write_text(json.dumps(_run("Matmul-BERT-M3-v0", 220.0, 200.0, busy=True)))
    assert bench.main(["--merge", str(b)]) == 0
    text = capsys.readouterr().out
    assert "not given (timed on a busy machine)" in text and "geomean" not in text


def _layer(paired: dict | None = None) -> dict:
    layer = {"peak_gflops": 200.0, "workload": all_suite_workloads()["Matmul-BERT-M3-v0"].to_json(),
             "kernels": [{"combo": "tiles-dgd", "budget": 256, "weights": "per call", "first_gflops": 190.0,
                          "retimed": 180.0, "retimed_busy": False}],
             "vendors": [{"library": "torch oneDNN", "layout": "NHWC", "weights": "per call", "gflops": 200.0,
                          "retimed": 200.0, "busy": False, "backend": "torch"}]}
    if paired is not None:
        layer["paired_vendor"] = paired
    return layer


def test_bench_kernels_prints_the_paired_figure_beside_the_ratio_and_reads_reports_without_it(bench):
    text, ratio = bench.layer_table(_layer(), 256)  # a report of an earlier version
    assert ratio == pytest.approx(0.9) and "paired /vendor" not in text
    paired = {"combo": "tiles-dgd", "budget": 256, "vendor": "torch oneDNN NHWC", **PAIRED}
    text, _ = bench.layer_table(_layer(paired), 256)
    ratio_line, paired_line = text.splitlines()[-2:]
    assert ratio_line.startswith("   best tensorgym kernel @256 (tiles-dgd) / vendor's best")
    assert paired_line == ("   paired /vendor: best tensorgym kernel @256 (tiles-dgd) / torch oneDNN NHWC, paired in "
                           "one process: 0.97x (spread 1.2 %, vendor drift +0.4 %, steal 0.0 %); timed apart: 0.95x")


def test_merge_prints_the_geomean_of_the_paired_ratios_with_their_worst_spread_and_drift(bench, tmp_path, capsys):
    paths = []
    for name, speedup, drift in (("Conv2d-ResNet-R5-v0", 1.06, -0.107), ("Conv2d-ResNet-R11-v0", 0.97, 0.041)):
        run = _run(name, 180.0, 200.0)
        run["layers"][name]["paired_vendor"] = {"combo": "microkernel-in-kernel", "budget": 256, "vendor": "oneDNN",
                                                **PAIRED, "speedup": speedup, "vendor_drift": drift}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run))
        paths.append(str(path))
    out = tmp_path / "merged.json"
    assert bench.main(["--merge", *paths, "--json", str(out)]) == 0
    geomean = (1.06 * 0.97) ** 0.5
    assert (f"geomean over 2 layer(s) of the paired ratio: {geomean:.2f}x (spread up to 1.2 %, vendor drift up to "
            f"10.7 %)") in capsys.readouterr().out
    assert json.loads(out.read_text())["paired_geomean"]["geomean"] == pytest.approx(geomean)
    assert bench.print_paired_geomean({"x": {"kernels": []}}) is None  # no layer paired: nothing printed


def test_the_pair_is_like_with_like(bench):
    """The paired reference is the fastest vendor in the kernel's own packing state, not a per-call reorder that
    re-timed a little faster by chance; only without one of that state is it the fastest of all."""
    kernel = {"weights": "pre-packed", "retimed": 220.0}
    per_call = {"library": "oneDNN", "weights": "per call", "retimed": 217.7}
    packed = {"library": "oneDNN", "weights": "pre-packed", "retimed": 214.5}
    assert bench.paired_reference(kernel, [per_call, packed]) is packed
    assert bench.paired_reference(kernel, [per_call]) is per_call
    assert bench.paired_reference({"weights": "per call", "retimed": 1.0}, [per_call, packed]) is per_call


def test_a_merged_report_merges_again_and_a_layer_run_twice_counts_once(bench, tmp_path, capsys):
    """A merged report (several runs' settings) merges with newer runs; a layer in both keeps the newer figures,
    and the geometric mean counts each layer once."""
    first = []
    for name, kernel in (("Conv2d-ResNet-R5-v0", 180.0), ("Matmul-BERT-M3-v0", 220.0)):
        path = tmp_path / f"old-{name}.json"
        path.write_text(json.dumps(_run(name, kernel, 200.0)))
        first.append(str(path))
    merged = tmp_path / "merged.json"
    assert bench.main(["--merge", *first, "--json", str(merged)]) == 0
    newer = tmp_path / "new-R5.json"
    newer.write_text(json.dumps(_run("Conv2d-ResNet-R5-v0", 210.0, 200.0)))
    again = tmp_path / "again.json"
    capsys.readouterr()
    assert bench.main(["--merge", str(merged), str(newer), "--json", str(again)]) == 0
    text = capsys.readouterr().out
    assert text.count("== Conv2d-ResNet-R5-v0") == 1 and "1.05x; 100 % of peak" in text
    geomean = (1.05 * 1.1) ** 0.5
    assert f"geomean over 2 layer(s) of best tensorgym / vendor's best: {geomean:.2f}x" in text
    report = json.loads(again.read_text())
    assert report["layers"]["Conv2d-ResNet-R5-v0"]["kernels"][-1]["retimed"] == 210.0
    assert len(report["settings"]) == 3
