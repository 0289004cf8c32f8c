"""The target: fingerprints keep machines apart, and LLVM gets every ISA extension the CPU has."""

from __future__ import annotations

import dataclasses

import pytest

from tensorgym.target import (
    CPU_ENV, Target, TargetError, constructed_cpu, local_cpu, native_cpu, resolve_target, restricted_cpu,
)


def test_fingerprint_separates_cpus_flags_and_cores():
    base = local_cpu()
    assert dataclasses.replace(base).fingerprint == base.fingerprint
    assert dataclasses.replace(base, num_cores=base.num_cores + 1).fingerprint != base.fingerprint
    assert dataclasses.replace(base, cpu_flags=base.cpu_flags[:-1]).fingerprint != base.fingerprint
    assert dataclasses.replace(base, cpu_model="other").fingerprint != base.fingerprint


def test_llvm_gets_the_extensions_its_cpu_model_lacks():
    """A virtual machine may report a model (Rocket Lake) without the AMX/BF16 units the CPU has."""
    cpu = Target(kind="llvm", cpu_model="test", cpu_flags=("avx512f", "avx512_vnni", "avx512_bf16", "amx_int8"),
                 num_cores=2, l1d_bytes=48 << 10, l2_bytes=2 << 20, l3_bytes=32 << 20, tvm_version="test",
                 mcpu="rocketlake")
    missing = cpu.llvm_missing_features("rocketlake")
    assert "+avx512bf16" in missing and "+amx-int8" in missing
    assert "+avx512vnni" not in missing  # Rocket Lake has VNNI
    assert "mattr" in str(cpu.tvm_target()) and "+avx512bf16" in str(cpu.tvm_target())
    plain = dataclasses.replace(cpu, cpu_flags=("avx512f",))
    assert plain.llvm_missing_features("rocketlake") == []


# -- restricted and constructed targets ------------------------------------------------------------------
AVX512_HOST = Target(kind="llvm", cpu_model="host", cpu_flags=("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                                               "avx512dq", "avx512vl", "avx512_vnni"),
                     num_cores=2, l1d_bytes=32 << 10, l2_bytes=1 << 20, l3_bytes=32 << 20, tvm_version="test")


def test_a_bigger_cpu_acts_as_an_avx2_one_with_its_own_fingerprint():
    avx2 = restricted_cpu(AVX512_HOST, "x86-64-v3")
    assert avx2.cpu_flags == ("sse4_2", "avx", "avx2", "fma") and avx2.mcpu == "x86-64-v3"
    assert (avx2.vector_lanes_fp32, avx2.vector_registers, avx2.isa_level) == (8, 16, "avx2")
    assert avx2.fingerprint != AVX512_HOST.fingerprint and "x86-64-v3" in avx2.label
    # Restricted and constructed targets of the same CPU name differ too (the host's model, caches, cores).
    assert avx2.fingerprint != constructed_cpu("x86-64-v3").fingerprint
    assert '"mcpu":"x86-64-v3"' in str(avx2.tvm_target()).replace(" ", "")
    # Vendors are restricted the same way; the machine as it is restricts nothing.
    env = avx2.vendor_environment()
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert AVX512_HOST.vendor_environment() == {}


def test_a_cpu_cannot_act_as_one_with_more_isa_and_bad_names_say_what_exists():
    avx2_host = restricted_cpu(AVX512_HOST, "x86-64-v3")
    with pytest.raises(TargetError, match="lacks avx512f"):
        restricted_cpu(avx2_host, "x86-64-v4")
    with pytest.raises(TargetError, match="known: x86-64-v3"):
        restricted_cpu(AVX512_HOST, "pentium")
    with pytest.raises(TargetError, match="compiled for"):
        restricted_cpu(AVX512_HOST, "neoverse-n1")
    with pytest.raises(TargetError, match="x86-64-v3"):
        resolve_target("avx9")


def test_the_environment_variable_restricts_the_local_cpu(monkeypatch):
    if native_cpu().missing_flags("avx2", "fma"):
        pytest.skip("this CPU has no AVX2 + FMA to act as x86-64-v3")
    local_cpu.cache_clear()
    try:
        monkeypatch.setenv(CPU_ENV, "x86-64-v3")
        restricted = local_cpu()
        assert restricted.profile == "x86-64-v3" and restricted.vector_lanes_fp32 == 8
        assert resolve_target(None) == restricted and resolve_target("native") == native_cpu()
        local_cpu.cache_clear()
        monkeypatch.setenv(CPU_ENV, "native")
        assert local_cpu() == native_cpu()
    finally:
        local_cpu.cache_clear()


def test_constructed_cpus_describe_their_register_files():
    assert constructed_cpu("haswell").vector_registers == 16 and constructed_cpu("znver4").vector_registers == 32
    spr = constructed_cpu("sapphirerapids")
    assert {"amx_tile", "amx_int8"} <= set(spr.cpu_flags) and spr.missing_flags("amx_tile", "sve") == ["sve"]
    arm = constructed_cpu("neoverse-n1")
    assert arm.mtriple == "aarch64-linux-gnu" and arm.vector_lanes_fp32 == 4
    assert "aarch64" in str(arm.tvm_target())


def test_a_restricted_avx512_cpu_keeps_the_onednn_levels_its_flags_allow():
    host = dataclasses.replace(AVX512_HOST, cpu_flags=AVX512_HOST.cpu_flags + ("avx512_bf16",))
    assert restricted_cpu(host, "x86-64-v4").vendor_environment()["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE"
    assert restricted_cpu(host, "cascadelake").vendor_environment()["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE_VNNI"
    assert restricted_cpu(host, "znver4").vendor_environment()["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE_BF16"
    assert restricted_cpu(host, "x86-64-v3").vendor_environment()["ONEDNN_MAX_CPU_ISA"] == "AVX2"
