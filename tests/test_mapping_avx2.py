"""The mapping space on AVX2 CPUs (Haswell, Zen 3: AVX2 + FMA, 16 vector registers, no VNNI, no AVX-512).

Symbolic tests (candidates, pruning, register blocks, packing, code generation) use constructed Haswell and
Zen 3 targets, whatever this machine is; the kernels are run on ``local_cpu()`` (any AVX2 CPU, or this one
restricted to one with ``TENSORGYM_CPU=x86-64-v3``), the vendor references and the command line on this CPU
restricted to ``x86-64-v3``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tensorgym.measure.tasks import reference_data, relative_error
from tensorgym.spaces.mapping import INTRINSICS, MappingSpace
from tensorgym.spaces.mapping.nest import Candidate, MappedNest
from tensorgym.spaces.mapping.packing import pack_weights
from tensorgym.spaces.mapping.pruning import register_block_fits, vector_registers_needed
from tensorgym.suites import all_suite_workloads
from tensorgym.target import constructed_cpu, local_cpu, native_cpu, restricted_cpu
from tensorgym.workloads import conv2d, matmul

AVX2_CPUS = ("haswell", "znver3")
LAYERS = {"R5": "Conv2d-ResNet-R5-v0", "C7": "Conv2d-ResNet18-C7-v0", "M3": "Matmul-BERT-M3-v0"}
AVX2_INTRINSICS = {"float32": "fma256", "int8": "pmaddwd256", "bf16": "bf16fma256"}
NEEDS_AVX2 = pytest.mark.needs_isa("avx2", "fma")


def _layer(layer: str, dtype: str):
    return all_suite_workloads()[LAYERS[layer]].with_dtype(dtype)


# -- candidates and pruning (constructed CPUs) -------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int8", "bf16"])
@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("cpu", AVX2_CPUS)
def test_every_dtype_of_r5_c7_m3_has_kept_candidates_on_avx2(cpu, layer, dtype):
    target = constructed_cpu(cpu)
    assert target.vector_registers == 16 and target.isa_level == "avx2"
    space = MappingSpace(_layer(layer, dtype), target)
    kept = {space.nests[i].intrinsic.name for i in space.kept}
    assert kept == {AVX2_INTRINSICS[dtype]}  # bf16: widened to fp32 on the FMA, not masked
    for nest, verdict in zip(space.nests, space.verdicts):
        if nest.intrinsic.name != AVX2_INTRINSICS[dtype]:
            # AVX-512, VNNI, AMX: masked, naming what the CPU lacks
            assert verdict.fate == "masked" and verdict.rule == "isa" and "the CPU lacks" in verdict.reason
    configs = space.sample_many(np.random.default_rng(0), 100)
    for config in configs:
        space.check(config)
    assert {space.candidate_of(c) for c in configs} == set(space.kept)


def test_the_register_rule_gives_avx2_register_blocks_that_fill_16_registers():
    """vpmaddwd needs a product register besides the accumulators, the weights and the activations."""
    target = constructed_cpu("haswell")
    for dtype in ("int8", "float32"):
        space = MappingSpace(_layer("M3", dtype), target)
        nest = space.nests[space.kept[0]]
        blocks = []
        for config in space.sample_many(np.random.default_rng(1), 400):
            s3 = {lp.name: config[lp.name][3] for lp in nest.spatial}
            calls, weights = int(np.prod(list(s3.values()))), s3[nest.names["lanes"]]
            assert vector_registers_needed(nest.intrinsic, calls, weights) <= 16
            blocks.append(calls)
        assert max(blocks) >= 8, (dtype, sorted(set(blocks)))  # the rule leaves room for real register blocks
        assert 0.5 < max(space.features(c)[space.feature_names.index("register_pressure")]
                         for c in space.sample_many(np.random.default_rng(2), 50)) <= 1.0
    nest = MappedNest(_layer("M3", "int8"), Candidate(INTRINSICS["pmaddwd256"], (("i", ("j",)), ("r", ("k",)))))
    # 6 x 2: 12 accumulators + 2 weight vectors + activations + product = 16; 4 x 3: 12 + 3 + 2 = 17
    assert register_block_fits(nest, {"i": 6, "j": 2}, target) is None
    problem = register_block_fits(nest, {"i": 4, "j": 3}, target)
    assert problem and "17 > 16 vector registers" in problem
    assert register_block_fits(nest, {"i": 4, "j": 3}, constructed_cpu("znver4")) is None  # 32 registers


def test_pmaddwd_packs_the_weights_in_pairs_of_the_reduction():
    """group 2: each 32-bit lane of the packed weights holds the two int8 one vpmaddwd lane sums."""
    wl = conv2d(1, 5, 8, 8, 20, 3, 2, padding=1, dtype="int8")
    nest = MappedNest(wl, Candidate(INTRINSICS["pmaddwd256"], (("i", ("f",)), ("r", ("rc", "rx")))))
    _, weights = wl.random_inputs()
    packed = pack_weights(nest, weights)
    assert packed.shape == nest.weight_shape == (3, 3, 5, 8, 2)  # [ceil(20/8), R (outer), 5*2/2, 8, 2]
    for f, c, ry, rx in ((0, 0, 0, 0), (17, 4, 2, 1), (19, 3, 1, 0), (8, 2, 0, 1)):
        fused = c * 2 + rx
        assert packed[f // 8, ry, fused // 2, f % 8, fused % 2] == weights[f, c, ry, rx]
    assert not packed[2, :, :, 4:, :].any()  # padded output channels 20..23
    matmul_nest = MappedNest(matmul(4, 16, 7, dtype="int8"),
                             Candidate(INTRINSICS["pmaddwd256"], (("i", ("j",)), ("r", ("k",)))))
    assert matmul_nest.weight_shape == (2, 4, 8, 2) and matmul_nest.activation_shape == (4, 8)  # K 7 -> 8
    # the activations are packed widened to int16 (broadcast from memory in every call), even when a matmul
    # needs no padding; the weights stay int8 and count once (a widening copy duplicates nothing)
    m3 = MappedNest(_layer("M3", "int8"), Candidate(INTRINSICS["pmaddwd256"], (("i", ("j",)), ("r", ("k",)))))
    assert m3.activation_shape == (512, 768)
    assert m3.resources.packed_activation_bytes == 512 * 768 * 2 and m3.resources.duplication == 1.0
    assert m3.resources.packed_weight_bytes == 768 * 3072


@pytest.mark.parametrize("cpu", AVX2_CPUS)
@pytest.mark.parametrize("dtype, instructions", [("int8", ("vpmaddwd", "vpmovsxbw")), ("float32", ("vfmadd",)),
                                                 ("bf16", ("vfmadd",))])
def test_avx2_kernels_compile_to_ymm_code_without_avx512(cpu, dtype, instructions):
    import tvm

    target = constructed_cpu(cpu)
    space = MappingSpace(_layer("M3", dtype), target, prepacked=True)
    config = space.sample(np.random.default_rng(0))
    asm = tvm.compile(space.builder().apply(config), target=target.tvm_target()).mod.inspect_source("asm")
    assert "zmm" not in asm and "ymm" in asm
    for instruction in instructions:
        assert instruction in asm, (instruction, space.describe(config))


# -- kernels on this CPU ------------------------------------------------------------------------------------
def _run(space, config, inputs):
    import tvm

    builder = space.builder()
    lib = tvm.compile(builder.apply(config), target=space.target.tvm_target())
    args = [tvm.runtime.tensor(a) for a in builder.kernel_arguments(config, inputs)]
    lib["main"](*args)
    return builder.canonical_output(config, [a.numpy() for a in args])


def _only(space, name):
    return [k for k in space.kept if space.nests[k].intrinsic.name == name]


@NEEDS_AVX2
@pytest.mark.parametrize("prepacked", [False, True])
@pytest.mark.parametrize("workload", [matmul(40, 48, 101, dtype="int8"),
                                      conv2d(1, 5, 9, 9, 20, 3, 3, 2, 1, dtype="int8")], ids=["matmul", "conv"])
def test_pmaddwd_kernels_are_bit_exact_even_where_pmaddubsw_saturates(workload, prepacked):
    space = MappingSpace(workload, local_cpu(), prepacked=prepacked)
    data, weights = workload.random_inputs()
    # 255 x -128 in every pair: 2 * 32640 would saturate an int16 sum (vpmaddubsw), not vpmaddwd's int32
    extreme = (np.full_like(data, 255), np.full_like(weights, -128))
    candidates = _only(space, "pmaddwd256")
    assert candidates
    rng = np.random.default_rng(0)
    for k in candidates[:4]:
        config = space.restricted(k).sample(rng)
        for inputs in ((data, weights), extreme):
            out = _run(space, config, inputs)
            assert np.array_equal(out, workload.reference(*inputs)), space.describe(config)


@NEEDS_AVX2
@pytest.mark.parametrize("dtype", ["float32", "bf16"])
def test_avx2_fma_kernels_match_numpy(dtype):
    for workload in (matmul(40, 48, 100, dtype=dtype), conv2d(1, 5, 9, 9, 20, 3, 3, 2, 1, dtype=dtype)):
        space = MappingSpace(workload, local_cpu())
        inputs, reference = reference_data(workload)
        for k in _only(space, AVX2_INTRINSICS[dtype])[:3]:
            config = space.restricted(k).sample(np.random.default_rng(k))
            error = relative_error(_run(space, config, inputs), reference)
            assert error <= workload.tolerance(1e-3), (space.describe(config), error)


# -- vendor references and the command line, this CPU restricted to x86-64-v3 --------------------------------
def _avx2_target():
    return restricted_cpu(native_cpu(), "x86-64-v3")


def test_vendor_kernel_families_are_named_from_onednn_and_aten():
    from tensorgym.baselines.vendor import aten_kernel, onednn_isa

    assert onednn_isa("onednn_verbose,v1,info,cpu,isa:Intel AVX2\n") == "avx2"
    assert onednn_isa("onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support") \
        == "avx512_core_vnni"
    assert onednn_isa("") == "unknown isa"
    assert aten_kernel(["aten::conv2d", "aten::convolution", "aten::_convolution", "aten::thnn_conv2d",
                        "aten::_slow_conv2d_forward", "aten::empty", "aten::resize_"]) == "aten::_slow_conv2d_forward"
    assert aten_kernel(["aten::mm", "aten::resolve_conj"]) == "aten::mm"
    # An allocation the kernel makes for its output is listed after the kernel's own operator: never the kernel.
    assert aten_kernel(["aten::_int_mm", "aten::empty_strided"]) == "aten::_int_mm"
    assert aten_kernel(["aten::addmm", "aten::zeros_like", "aten::new_empty", "aten::_to_copy"]) == "aten::addmm"


@NEEDS_AVX2
def test_pytorch_int8_and_bf16_references_on_avx2_name_their_kernel_family():
    pytest.importorskip("torch")
    from tensorgym.baselines import time_vendor

    target = _avx2_target()
    int_mm = time_vendor(matmul(64, 64, 64, dtype="int8"), target=target)
    # PyTorch hands torch._int_mm to oneDNN only where the CPU itself has VNNI or AMX (a bigger CPU restricted
    # to AVX2); on a CPU that is AVX2 only it runs its own kernel. Either way the kernel is named, never an
    # allocation, and oneDNN's is the AVX2 one.
    if int_mm.kernel.startswith("gemm_api"):
        assert int_mm.kernel.startswith("gemm_api:avx2 s8s8s32") and "int16-saturating" in int_mm.kernel
    else:
        assert int_mm.kernel == "not oneDNN: aten::_int_mm (PyTorch's own kernel)", int_mm.kernel
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in int_mm.environment
    conv = conv2d(1, 16, 8, 8, 32, 3, 3, padding=1, dtype="int8")
    for library, family in (("torch", "fbgemm:avx2"), ("onednn", ":avx2")):  # the x86 engine picks FBGEMM here
        result = time_vendor(conv, library, "quantized pre-packed", target=target)
        assert family in result.kernel and "int16-saturating" in result.kernel, result.kernel
    bf16 = time_vendor(matmul(64, 64, 64, dtype="bf16"), target=target)
    assert bf16.kernel.startswith("not oneDNN: aten::mm") and bf16.max_rel_error < 1e-2


@NEEDS_AVX2
def test_tune_runs_the_mapping_space_on_a_cpu_restricted_to_avx2(tmp_path):
    from tensorgym.database import Database

    db = tmp_path / "avx2.db"
    env = {**os.environ, "TENSORGYM_CPU": "x86-64-v3"}
    command = [sys.executable, "-c", "import sys; from tensorgym.cli import main; sys.exit(main(sys.argv[1:]))",
               "tune", "Conv2d-ResNet18-C7-v0", "--space", "mapping", "--dtype", "int8", "--budget", "2",
               "--db", str(db)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "best kernel: pmaddwd256" in done.stdout, done.stdout[-2000:]
    wl = _layer("C7", "int8")
    with Database(db) as database:
        records = database.records(wl.key, _avx2_target().fingerprint, "mapping")
    assert len(records) == 2 and all(r.ok for r in records)  # correct (exactly) and under the AVX2 fingerprint
