"""``tensorgym info``: the fingerprint, ISA, vector width, FMA peak and what runs on this CPU (and why not)."""

from __future__ import annotations

import json

import pytest

from tensorgym.cli import main
from tensorgym.cli.info import describe
from tensorgym.target import constructed_cpu, native_cpu


def test_info_describes_an_avx2_cpu_and_says_why_the_rest_does_not_run():
    info = describe(constructed_cpu("znver3"), cache_dir="/nonexistent-catalogues")
    assert (info["isa_level"], info["fp32_lanes"], info["vector_registers"], info["nchwc_block"]) == ("avx2", 8, 16, 8)
    assert info["fma_peak"]["gflops"] is None and "calibrate" in info["fma_peak"]["source"]
    runs = {i["name"]: i for i in info["intrinsics"]}
    assert runs["fma256"]["runs"] and runs["pmaddwd256"]["runs"]
    assert not runs["fma512"]["runs"] and "avx512f" in runs["fma512"]["why_not"]
    assert not runs["amx_int8"]["runs"] and "amx" in runs["amx_int8"]["why_not"]
    assert "saturat" in runs["pmadd512"]["why_not"] or "avx512bw" in runs["pmadd512"]["why_not"]
    assert set(info["spaces"]["mapping"]["dtypes"]) == {"float32", "int8", "bf16"}
    assert info["spaces"]["cutlass"]["dtypes"] == []


def test_info_on_sapphire_rapids_runs_amx():
    info = describe(constructed_cpu("sapphirerapids"), cache_dir="/nonexistent-catalogues")
    assert info["isa_level"] == "avx512" and info["fp32_lanes"] == 16
    assert {i["name"] for i in info["intrinsics"] if i["runs"]} >= {"amx_int8", "amx_bf16", "vnni512", "fma512"}


def test_the_command_prints_text_and_json(capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "fingerprint" in text and "mapping intrinsics:" in text and "this CPU can act as" in text
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["native_fingerprint"] == native_cpu().fingerprint and info["flags"]


@pytest.mark.needs_isa("avx2", "fma")
def test_the_command_shows_a_restricted_target_with_its_own_fingerprint(capsys):
    assert main(["info", "--target", "x86-64-v3", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["restricted_to"] == "x86-64-v3" and info["fingerprint"] != info["native_fingerprint"]
    assert info["flags"] == ["sse4_2", "avx", "avx2", "fma"] and info["vector_bits"] == 256
