"""The CPU matrix, compile-only: every space's kernels build for CPUs this machine need not be.

For constructed targets of Haswell, Zen 3, Skylake-X, Cascade Lake, Zen 4 and
Sapphire Rapids (``tensorgym.target.constructed_cpu``), each space's kernels
for R5 (3x3 conv), C7 (1x1 conv) and M3 (matmul), in every dtype the space
takes, either compile (LLVM emits code for CPUs it does not run on; nothing is
run) or are refused with the reason. The tiles space is also compiled for an
aarch64 CPU (NEON), to an object file only: linking and running need an Arm
machine.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tensorgym.spaces import SpaceError
from tensorgym.suites import all_suite_workloads
from tensorgym.target import constructed_cpu

CPUS = ("haswell", "znver3", "skylake-avx512", "cascadelake", "znver4", "sapphirerapids")
LAYERS = {"R5": "Conv2d-ResNet-R5-v0", "C7": "Conv2d-ResNet18-C7-v0", "M3": "Matmul-BERT-M3-v0"}


def _workload(layer: str, dtype: str = "float32"):
    return all_suite_workloads()[LAYERS[layer]].with_dtype(dtype)


def _space(name: str, workload, target):
    if name == "tiles":
        from tensorgym.spaces import TilesSpace

        return TilesSpace(workload, target)
    if name == "microkernel":
        from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, MicrokernelSpace, enumerate_microkernels

        rules = EnumerationRules.for_target(target, quick=True)
        catalogue = Catalogue.unmeasured(target, enumerate_microkernels(rules), rules=rules)
        return MicrokernelSpace(workload, target, catalogue=catalogue)
    from tensorgym.spaces.mapping import MappingSpace

    return MappingSpace(workload, target)


def _assembly(space, config) -> str:
    import tvm

    from tensorgym.measure.tasks import _tvm_target

    executable = tvm.compile(space.builder().apply(config), target=_tvm_target(space.target))
    return executable.mod.inspect_source("asm")


CASES = [(cpu, layer, space, dtype) for cpu in CPUS for layer in LAYERS
         for space, dtypes in (("tiles", ("float32",)), ("microkernel", ("float32",)),
                               ("mapping", ("float32", "int8", "bf16")))
         for dtype in dtypes]


@pytest.mark.parametrize("cpu,layer,space_name,dtype", CASES, ids=["-".join(c) for c in CASES])
def test_every_space_builds_for_every_cpu_or_says_why_not(cpu, layer, space_name, dtype):
    target = constructed_cpu(cpu)
    try:
        space = _space(space_name, _workload(layer, dtype), target)
    except SpaceError as exc:
        # Refused up front: the message names the reason (an ISA the CPU lacks, an inexact intrinsic).
        assert re.search(r"lacks|exact|saturat|no .* intrinsic|needs", str(exc)), str(exc)
        assert dtype == "bf16", f"every AVX2 CPU runs {space_name} {dtype}, but {cpu} was refused: {exc}"
        return
    config = space.sample(np.random.default_rng(0))
    asm = _assembly(space, config)
    # The code uses the CPU's widest vectors, and nothing wider: no zmm register on an AVX2 CPU.
    wide = "zmm" in asm
    assert wide == (target.vector_lanes_fp32 == 16) or (not wide and target.vector_lanes_fp32 == 16), cpu
    if target.vector_lanes_fp32 == 8:
        assert "ymm" in asm and not wide, f"{space_name} on {cpu}: no 256-bit code"
    if space_name == "mapping" and "amx" in space.nests[space.candidate_of(config)].candidate.intrinsic.name:
        assert "tdp" in asm


def test_tiles_kernels_compile_for_aarch64_to_an_object_file(tmp_path):
    import tvm

    from tensorgym.measure.tasks import _tvm_target
    from tensorgym.spaces import TilesSpace

    target = constructed_cpu("neoverse-n1")
    assert target.vector_lanes_fp32 == 4 and target.vector_registers == 32 and target.isa_level == "neon"
    for layer in LAYERS:
        space = TilesSpace(_workload(layer), target)
        executable = tvm.compile(space.builder().apply(space.sample(np.random.default_rng(1))),
                                 target=_tvm_target(target))
        path = tmp_path / f"{layer}.o"
        executable.mod.write_to_file(str(path))
        header = path.read_bytes()[:20]
        assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183, layer  # EM_AARCH64
        assert "fmla" in executable.mod.inspect_source("asm"), layer  # NEON fused multiply-adds
