"""A landscape as the scalar tuning parameters other tuners search, and Kernel Tuner replaying it.

The parameters are exactly the knobs the landscape varies (no constant level, no implied outermost
level); Kernel Tuner's cache file names them, and its simulation mode searches exactly the
landscape's configs, answered with the landscape's own times.
"""

from __future__ import annotations

import json
import math

import pytest

from test_landscape_data import BOUNDS, synthetic_landscape
from tensorgym.cli import main
from tensorgym.landscape import Landscape, find_landscape
from tensorgym.landscape.export import kernel_tuner_cache, write_kernel_tuner_cache
from tensorgym.landscape.parameters import ParameterIndex, free_parameters, parameter_values


def test_the_parameters_are_the_knobs_the_landscape_varies_and_name_each_config_once():
    land = synthetic_landscape()
    parameters = free_parameters(land)
    varied = {name: sorted(values) for name, values in BOUNDS.items() if len(values) > 1}
    varied["cache_write"] = [0, 1]  # not bounded: the space offers both
    assert parameters == varied  # no constant level, no implied level 0
    assert math.prod(len(v) for v in parameters.values()) >= len(land)
    index = ParameterIndex(land)
    for row, config in enumerate(land.configs):
        assert index.row(parameter_values(config, parameters)) == row
    assert index.row({name: -7 for name in parameters}) is None


def test_shipped_landscapes_have_few_parameters_that_span_not_many_more_combinations_than_configs():
    land = Landscape.load(find_landscape("Conv2d-ResNet-R5-v0"))
    parameters = free_parameters(land)
    combinations = math.prod(len(v) for v in parameters.values())
    assert len(parameters) <= 16 and combinations <= 10 * len(land)  # all the levels would span hundreds of times
    assert not any(name.endswith(".0") for name in parameters)  # the implied outermost levels are gone


def test_kernel_tuner_cache_is_its_format_with_cache_last():
    land = synthetic_landscape()
    doc = kernel_tuner_cache(land)
    assert list(doc)[-1] == "cache" and doc["tune_params_keys"] == list(doc["tune_params"])
    assert len(doc["cache"]) == len(land)
    for row, (key, entry) in enumerate(doc["cache"].items()):
        values = [entry[name] for name in doc["tune_params_keys"]]
        assert key == ",".join(map(str, values))
        charged = entry["compile_time"] + entry["verification_time"] + entry["benchmark_time"]
        assert charged == pytest.approx(land.wall_s[row] * 1e3)  # what the tuning clock charges
        if land.ok[row]:
            assert entry["time"] == pytest.approx(land.latency_s[row] * 1e3)
        else:
            assert entry["time"] in ("CompilationFailedConfig", "RuntimeFailedConfig")


@pytest.mark.filterwarnings("ignore:None of the tunable parameters specify thread block dimensions")
def test_kernel_tuner_replays_the_exported_landscape_in_simulation_mode(tmp_path):
    kernel_tuner = pytest.importorskip("kernel_tuner")
    land = synthetic_landscape()
    path = write_kernel_tuner_cache(land, tmp_path / "tiny_cache.json")
    results, env = kernel_tuner.tune_cache(str(path), strategy="genetic_algorithm",
                                           strategy_options={"max_fevals": 40}, quiet=True)
    index = ParameterIndex(land)
    assert len({tuple(r[name] for name in free_parameters(land)) for r in results}) > 10
    for result in results:
        row = index.row(result)
        assert row is not None and land.ok[row]  # only the landscape's configs, and only correct ones
        assert result["time"] == pytest.approx(land.latency_s[row] * 1e3)
    best = min(results, key=lambda r: r["time"])
    assert best["time"] >= land.optimum.latency_s * 1e3 * (1 - 1e-9)
    # Kernel Tuner searched the landscape's correct configs only.
    names = list(free_parameters(land))
    valid = {tuple(parameter_values(c, free_parameters(land)).values()) for c, ok in zip(land.configs, land.ok) if ok}
    searched = {tuple(r[n] for n in names) for r in results}
    assert searched <= valid


def test_export_writes_a_shipped_landscape_without_a_database(tmp_path, capsys):
    t4, cache = tmp_path / "R5_T4.json", tmp_path / "R5_cache.json"
    assert main(["landscape", "export", "Conv2d-ResNet-R5-v0", "--t4", str(t4), "--kernel-tuner", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "Kernel Tuner cache" in out and "f.0" not in out
    land = Landscape.load(find_landscape("Conv2d-ResNet-R5-v0"))
    doc = json.loads(cache.read_text())
    assert len(doc["cache"]) == len(land) and list(doc)[-1] == "cache"
    results = json.loads(t4.read_text())["results"]
    assert set(results[0]["configuration"]) == set(doc["tune_params"])
    file_source = tmp_path / "again.json"
    assert main(["landscape", "export", str(find_landscape("Conv2d-ResNet-R5-v0")), "--kernel-tuner",
                 str(file_source)]) == 0
    assert json.loads(file_source.read_text())["cache"] == doc["cache"]
    assert not list(tmp_path.glob("*.db"))  # no database was made


def test_export_without_a_database_or_an_output_is_one_line(tmp_path, capsys):
    assert main(["landscape", "export", "Conv2d-ResNet-R5-v0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--kernel-tuner" in err
    assert main(["landscape", "export", "Conv2d-ResNet-R5-v0", "--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "landscape measure" in err
    assert not list(tmp_path.iterdir())  # refused without leaving an empty database behind
