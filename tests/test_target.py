"""The target: fingerprints keep machines apart, and LLVM gets every ISA extension the CPU has."""

from __future__ import annotations

import dataclasses

from tensorgym.target import Target, local_cpu


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
