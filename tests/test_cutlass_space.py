"""The cutlass space (seed 001): candidate lists per architecture, knobs and their constraints, layouts,
the C++ that cutlass_library emits, and nvcc builds of it (slow: CUTLASS takes nvcc 10 s to minutes)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from fakes import run_search

from tensorgym.agents.exhaustive import ExhaustiveAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.spaces.base import SpaceError
from tensorgym.spaces.cutlass import CutlassSpace, candidate_tiles
from tensorgym.spaces.cutlass.templates import SM75_TILES, SM80_TILES
from tensorgym.suites import SUITES
from tensorgym.target import cuda_target, local_cpu
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul

H100, A100 = cuda_target("h100"), cuda_target("a100")
M3_FP16 = dataclasses.replace(SUITES["BERT"]["M3"], dtype="float16")
R5_FP16 = dataclasses.replace(SUITES["ResNet-50"]["R5"], dtype="float16")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def test_candidate_counts_per_architecture():
    h100_smem, a100_smem = 227 * 1024, 163 * 1024
    # TVM's port: 22 sm_80 tiles + 7 sm_75 tiles for fp16; CUTLASS's 28 Hopper GEMMs on sm_90 only.
    assert len(candidate_tiles("matmul", "float16", (8, 0), a100_smem)) == 22 + 7
    hopper = candidate_tiles("matmul", "float16", (9, 0), h100_smem)
    assert len(hopper) == 22 + 7 + 28 and sum(t.family == 90 for t in hopper) == 28
    assert len(candidate_tiles("conv2d", "float16", (9, 0), h100_smem)) == 29  # no 3.x conv in the space
    assert len(candidate_tiles("matmul", "bf16", (9, 0), h100_smem)) == 22 + 28  # no sm_75 bf16 mma
    tf32 = candidate_tiles("matmul", "float32", (9, 0), h100_smem)
    assert len(tf32) == 22 and all(t.instruction == (16, 8, 8) and t.alignments == (4, 2, 1) for t in tf32)
    assert all(t.threadblock[2] in (16, 32) for t in tf32)  # half the fp16 K
    assert len(candidate_tiles("matmul", "float16", (7, 5), 64 * 1024)) == 7  # a T4: the sm_75 list
    # A GPU with 100 KiB per block loses the port's "smem-limited" K=64 tiles (3 x (256+128) x 64 x 2 B = 144 KiB).
    assert len(candidate_tiles("matmul", "float16", (8, 9), 99 * 1024)) < 29


def test_the_2x_lists_are_tvms_cutlass_port():
    gen = pytest.importorskip("tvm.contrib.cutlass.gen_tensor_op")
    for dtype in ("float16", "float32"):
        found: list[tuple] = []

        def record(tile_descriptions, data_type, alignments, found=found):
            for td in tile_descriptions:
                found.append((tuple(td.threadblock_shape), td.stages, tuple(td.warp_count),
                              tuple(td.math_instruction.instruction_shape), tuple(alignments)))
            return []

        gen.GENERATOR_FUNC_TABLE[80]("float32", dtype, dtype, record, lambda a: True, use_3xtf32=False,
                                     profile_all_alignments=True)
        ours = [(t.threadblock, t.stages, t.warps, t.instruction, t.alignments)
                for t in candidate_tiles("matmul", dtype, (8, 0), 1 << 30)]
        assert ours == found
    assert len(SM80_TILES) == 22 and len(SM75_TILES) == 7


def test_configs_of_m3_fp16_on_an_h100():
    space = make_space("cutlass", M3_FP16, H100)
    assert isinstance(space, CutlassSpace)
    configs = space.configs()
    # 2.x: 29 tiles x 4 swizzles x split-K slices (1, 2, 4, 8; at least one K step each); 3.x: 28 x 4 swizzles.
    expected = sum(4 * sum(1 for s in (1, 2, 4, 8) if s <= -(-768 // t.threadblock[2]))
                   for t in space.tiles.values() if t.family == 80) + 28 * 4
    assert len(configs) == len(set(configs)) == expected
    assert {c["alignment"] for c in configs} == {8}  # the widest the problem allows (Bolt's default)
    for config in configs[:: max(1, len(configs) // 50)]:
        space.check(config)
    assert len(make_space("cutlass", M3_FP16, H100, all_alignments=True).configs()) > len(configs)
    assert len(make_space("cutlass", M3_FP16, A100).configs()) < len(configs)  # no Hopper kernels


def test_alignment_follows_the_problem():
    odd = make_space("cutlass", matmul(256, 260, 512, dtype="float16"), H100)  # N = 260: 4 divides, 8 does not
    assert {c["alignment"] for c in odd.configs()} == {4}
    assert all(c["tile"][0] == 80 for c in odd.configs())  # the Hopper list needs 8
    assert {c["alignment"] for c in make_space("cutlass", matmul(64, 63, 63, dtype="float16"), H100).configs()} == {1}
    with pytest.raises(SpaceError, match="no CUTLASS template fits"):  # bf16 has no alignment-1 (sm_75) tiles
        make_space("cutlass", matmul(64, 63, 63, dtype="bf16"), H100)
    assert {c["alignment"] for c in make_space("cutlass", conv2d(1, 3, 32, 32, 64, 3, 3, dtype="float16"),
                                                 H100).configs()} == {1}  # C = 3: the sm_75 tiles' alignment 1


def test_bad_configs_and_targets_are_refused():
    space = make_space("cutlass", M3_FP16, H100)
    good = space.configs()[0]
    with pytest.raises(SpaceError, match="not a template"):
        space.check(good.replace(tile=(80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)))
    with pytest.raises(SpaceError, match="alignment"):
        space.check(good.replace(alignment=2))
    with pytest.raises(SpaceError, match="knobs"):
        space.check(Config({"tile": good["tile"]}))
    hopper = next(c for c in space.configs() if c["tile"][0] == 90)
    with pytest.raises(SpaceError, match="split_k"):
        space.check(hopper.replace(split_k=2))
    with pytest.raises(SpaceError, match="CUDA target"):
        CutlassSpace(M3_FP16, local_cpu())
    with pytest.raises(SpaceError, match="epilogue"):
        CutlassSpace(M3_FP16, H100, epilogue="gelu")
    with pytest.raises(SpaceError, match="no int8 kernels"):
        CutlassSpace(M3_FP16.with_dtype("int8"), H100)
    with pytest.raises(SpaceError, match="takes NCHW conv2d"):
        CutlassSpace(dataclasses.replace(R5_FP16, layout="NHWC"), H100)
    assert CutlassSpace.tensor_cores  # checked to the protocol's tolerance (Workload.tolerance)


def test_hops_and_neighbours_stay_in_the_space():
    space = make_space("cutlass", M3_FP16, H100)
    for config in space.configs()[::37]:
        for action, allowed in enumerate(space.hop_mask(config)):
            hopped = space.hop(config, action // 2, -1 if action % 2 else 1)
            assert (hopped is not None) == allowed
        for neighbour in space.neighbours(config, 2):
            space.check(neighbour)
        assert np.all((space.encode(config) >= 0) & (space.encode(config) <= 1))
        assert space.features(config).shape == (len(space.feature_names),)
        assert space.generic_features(config).shape == (len(space.generic_feature_names),)


def test_split_k_comes_with_the_separate_epilogue_only():
    # Fused bias + ReLU under serial split-K wrote NaN on an H200 (CUTLASS's per-slice NaN threshold).
    space = make_space("cutlass", matmul(512, 768, 256, dtype="float16"), H100, epilogue="bias_relu",
                       split_k=(1, 2))
    assert {c["epilogue"] for c in space.configs() if c["split_k"] == 2} == {2}
    assert {c["epilogue"] for c in space.configs() if c["split_k"] == 1} == {1, 2}
    fused = next(c for c in space.configs() if c["epilogue"] == 1 and c["tile"][0] == 80)
    with pytest.raises(SpaceError, match="epilogue 1 is not allowed"):
        space.check(fused.replace(split_k=2))


def test_features_count_waves_of_threadblocks():
    space = make_space("cutlass", M3_FP16, H100)
    config = next(c for c in space.configs() if c["tile"][:4] == (80, 128, 128, 32) and c["split_k"] == 2)
    features = dict(zip(space.feature_names, space.features(config)))
    blocks = (512 // 128) * (3072 // 128) * 2  # 192 threadblocks
    slots = 132 * features["blocks_per_sm"]
    assert features["waves"] == pytest.approx(blocks / slots)
    assert features["tile_intensity"] == pytest.approx(128 * 128 / 256)
    assert features["log2_split_k"] == 1.0


def test_conv_layout_and_epilogue_round_trip():
    wl = conv2d(1, 8, 6, 6, 16, 3, 3, dtype="float16")
    space = make_space("cutlass", wl, H100, epilogue="bias_relu")
    assert {c["epilogue"] for c in space.configs()} == {1, 2}
    config = space.configs()[0]
    inputs = wl.random_inputs(0)
    data, weights, bias, out = space.builder().kernel_arguments(config, inputs)
    assert data.shape == (1, 6, 6, 8) and weights.shape == (16, 3, 3, 8) and out.shape == (1, 6, 6, 16)
    assert bias.shape == (16,) and bias.min() > 8 * 9  # above any |sum| of C R S products of [-1, 1) numbers
    reference = wl.reference(*inputs)
    # What a correct fused kernel writes: relu(conv + bias) in NHWC = conv + bias (nothing is clipped).
    written = np.maximum(reference.transpose(0, 2, 3, 1) + bias, 0)
    np.testing.assert_allclose(space.builder().canonical_output(config, [data, weights, bias, written]), reference,
                               atol=1e-5)


def test_emitted_cpp_comes_from_cutlass_library():
    space = make_space("cutlass", M3_FP16, H100, epilogue="bias_relu")
    two = next(c for c in space.configs() if c["tile"][0] == 80 and c["epilogue"] == 1 and c["swizzle"] == 4)
    kernel = space.builder().cuda_kernel(two)
    assert kernel.output == "library" and kernel.gencode == ("arch=compute_80,code=sm_90",)
    assert kernel.runtime == (two["split_k"],)
    assert "DefaultGemmUniversal" in kernel.source and "LinearCombinationRelu" in kernel.source
    assert "GemmIdentityThreadblockSwizzle<4>" in kernel.source and "tg_prepare" in kernel.source
    three = next(c for c in space.configs() if c["tile"][0] == 90 and c["epilogue"] == 1)
    source = space.builder().cuda_kernel(three).source
    assert "LinCombPerRowBiasEltAct" in source and "cutlass3x_sm90" in source
    assert space.builder().cuda_kernel(three).gencode == ("arch=compute_90a,code=sm_90a",)
    separate = space.builder().cuda_kernel(next(c for c in space.configs() if c["epilogue"] == 2)).source
    assert "LinearCombinationRelu" not in separate and "tg_bias_relu" in separate
    conv = make_space("cutlass", R5_FP16, H100)
    assert "DefaultConv2dFprop" in conv.builder().cuda_kernel(conv.configs()[0]).source


def _synthetic(space):
    from fakes import SyntheticEvaluator

    def perf(config):
        features = space.features(config)
        return float(10 * features[0] + 5 * features[3])

    return Tuner(SyntheticEvaluator(space, perf), budget=40)  # type: ignore[arg-type]


def test_exhaustive_and_ga_search_the_cutlass_space():
    space = make_space("cutlass", matmul(512, 512, 256, dtype="float16"), A100, swizzles=(1, 8), split_k=(1, 2))
    result = run_search(ExhaustiveAgent(batch_size=16), Tuner(_synthetic(space).evaluator, budget=None,
                                                              time_budget=60))
    assert [t.config for t in result.trials] == space.configs() and result.extra["space_size"] == len(space.configs())
    ga = run_search(GAAgent(population=64, generations=2, batch_size=16, num_warmup_sample=16,
                            model_options={"num_boost_round": 50}), _synthetic(space))
    assert len(ga.trials) == 40 and all(space.is_valid(t.config) for t in ga.trials)


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("which", ["gemm-2x-fused", "conv-2x-separate", "gemm-3x-fused"])
def test_nvcc_builds_cutlass_libraries(which, tmp_path, monkeypatch):
    """Each library compiles and exports the C interface (10-20 s for 2.x kernels here, minutes for 3.x)."""
    import subprocess

    from tensorgym.cuda.nvcc import compile_cuda

    monkeypatch.setenv("TENSORGYM_CUDA_CACHE", str(tmp_path))
    workload = R5_FP16 if which.startswith("conv") else M3_FP16
    space = make_space("cutlass", workload, H100, epilogue="bias_relu")
    family, epilogue = (90 if "3x" in which else 80), (1 if "fused" in which else 2)
    config = next(c for c in space.configs() if c["tile"][0] == family and c["epilogue"] == epilogue)
    kernel = space.builder().cuda_kernel(config)
    built = compile_cuda(kernel.source, output=kernel.output, gencode=kernel.gencode, flags=kernel.flags,
                         include_dirs=kernel.include_dirs)
    symbols = subprocess.run(["nm", "-D", "--defined-only", built.path], capture_output=True, text=True).stdout
    for name in ("tg_prepare", "tg_initialize", "tg_run", "tg_last_error"):
        assert f" T {name}" in symbols


def test_the_cutlass_env_hops_over_the_templates_knobs(tmp_path):
    import gymnasium as gym

    import tensorgym  # noqa: F401 - registers the ids
    from tensorgym.envs import CutlassEnv

    env = gym.make("Matmul-BERT-M3-v0", target=H100, space="cutlass", db=str(tmp_path / "r.db"))
    try:
        base = env.unwrapped
        assert isinstance(base, CutlassEnv) and isinstance(base.search_space, CutlassSpace)
        assert env.action_space.n == 2 * len(base.search_space.coordinates) == 10  # five knobs, up and down
        assert env.observation_space.shape == (5 + len(base.search_space.feature_names) + 2,)
    finally:
        env.close()
