"""The mapping space (seed 002, GTA): candidate enumeration, pruning, tiles, moves, features, tensorized kernels.

Symbolic tests (candidates, pruning, masks, samples, features) use a constructed Sapphire Rapids, which has
every intrinsic's ISA whatever this machine has; tests that compile and run kernels use ``local_cpu()`` (after
``TENSORGYM_CPU``) and say which ISA they need (``needs_isa``). The AVX2 intrinsics: tests/test_mapping_avx2.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensorgym.config import Config
from tensorgym.measure.tasks import relative_error
from tensorgym.spaces import SpaceError, TilesSpace
from tensorgym.spaces.mapping import INTRINSICS, MIN_UTILISATION, MappingSpace
from tensorgym.spaces.mapping.enumeration import (
    basic_tuples, candidates, computation, dot_product, intrinsic_computation, matrix_multiply, operator_of,
)
from tensorgym.spaces.mapping.nest import Candidate, MappedNest
from tensorgym.spaces.mapping.packing import pack_weights
from tensorgym.spaces.mapping.pruning import UNFOLD_DUPLICATION, vector_registers_needed
from tensorgym.spaces.mapping.space import candidate_table
from tensorgym.suites import all_suite_workloads
from tensorgym.target import constructed_cpu, local_cpu
from tensorgym.workloads import conv2d, matmul

CPU = local_cpu()  # where kernels compile and run: only the tests that run kernels use it
SPR = constructed_cpu("sapphirerapids")  # symbolic tests: AMX, VNNI, AVX512-BF16 and AVX2, on any machine
NEEDS_AMX = pytest.mark.needs_isa("amx_tile", "amx_int8", "amx_bf16")

# GTA's operators in NCHW, loops named as in its Table 2.
C1D = computation(["n", "k", "p", "rc", "rs"], ["rc", "rs"],
                  {"A": [["n"], ["rc"], ["p", "rs"]], "B": [["k"], ["rc"], ["rs"]], "C": [["n"], ["k"], ["p"]]})
C2D = computation(["n", "k", "p", "q", "rc", "rr", "rs"], ["rc", "rr", "rs"],
                  {"A": [["n"], ["rc"], ["p", "rr"], ["q", "rs"]], "B": [["k"], ["rc"], ["rr"], ["rs"]],
                   "C": [["n"], ["k"], ["p"], ["q"]]})
C3D = computation(["n", "k", "d", "h", "w", "rc", "rd", "rh", "rw"], ["rc", "rd", "rh", "rw"],
                  {"A": [["n"], ["rc"], ["d", "rd"], ["h", "rh"], ["w", "rw"]],
                   "B": [["k"], ["rc"], ["rd"], ["rh"], ["rw"]], "C": [["n"], ["k"], ["d"], ["h"], ["w"]]})
GEMM = computation(["m", "n", "k"], ["k"], {"A": [["m"], ["k"]], "B": [["k"], ["n"]], "C": [["m"], ["n"]]})
AWKWARD = dict(N=1, C=3, H=17, W=17, F=127, R=3, S=3, stride=2, padding=1)  # the awkward user shape


def awkward(dtype):
    return conv2d(**AWKWARD, dtype=dtype, name="awkward")


# -- enumeration ---------------------------------------------------------------------------------------------
def test_gta_table2_basic_tuples_in_order_and_35_tensor_core_candidates():
    assert basic_tuples(C2D, matrix_multiply()) == [
        ("n", "k", "rc"), ("n", "k", "rr"), ("n", "k", "rs"), ("p", "k", "rc"), ("p", "k", "rs"),
        ("q", "k", "rc"), ("q", "k", "rr")]
    found = candidates(C2D, matrix_multiply())
    assert len(found) == 35 and len(set(found)) == 35
    # candidates fuse the union of the chosen tuples' loops, e.g. that of the all-ones selection
    assert (("i1", ("n", "p", "q")), ("i2", ("k",)), ("r1", ("rc", "rr", "rs"))) in found
    assert found[0] == (("i1", ("q",)), ("i2", ("k",)), ("r1", ("rr",)))  # selection 0000001: mapping7


@pytest.mark.parametrize("op, mma, dot", [(GEMM, (1, 1), (1, 1)), (C1D, (3, 6), (2, 3)), (C2D, (7, 35), (3, 7)),
                                          (C3D, (13, 14), (4, 15))])
def test_candidate_counts_onto_tensor_core_and_dot_product(op, mma, dot):
    # C3D onto the Tensor Core has 13 > 10 basic tuples: one-hots whose extents fit (none known: all) + all-ones
    assert (len(basic_tuples(op, matrix_multiply())), len(candidates(op, matrix_multiply()))) == mma
    assert (len(basic_tuples(op, dot_product())), len(candidates(op, dot_product()))) == dot


def test_a_conv2d_workload_maps_onto_a_dot_product_in_7_ways_and_a_matmul_in_one():
    conv = conv2d(1, 64, 56, 56, 64, 3, 3)
    dot = candidates(operator_of(conv), dot_product())
    assert {dict(m)["i"] for m in dot} == {("f",)}
    assert sorted(dict(m)["r"] for m in dot) == sorted(
        [("rc",), ("ry",), ("rx",), ("rc", "ry"), ("rc", "rx"), ("ry", "rx"), ("rc", "ry", "rx")])
    assert len(candidates(operator_of(conv), matrix_multiply(names=("i1", "i2", "r")))) == 35
    for intrinsic in INTRINSICS.values():
        (mapping,) = candidates(operator_of(matmul(64, 64, 64)), intrinsic_computation(intrinsic))
        expected = {"i": ("j",), "r": ("k",)} if intrinsic.shape == "dot" else \
            {"i1": ("i",), "i2": ("j",), "r": ("k",)}
        assert dict(mapping) == expected


def test_every_intrinsic_of_a_dtype_gets_its_candidates():
    wl = all_suite_workloads()["Conv2d-ResNet18-C5-v0"].with_dtype("int8")
    space = MappingSpace(wl, SPR)
    per_intrinsic = {}
    for label in space.candidates:
        per_intrinsic[label.split()[0]] = per_intrinsic.get(label.split()[0], 0) + 1
    assert per_intrinsic == {"amx_int8": 35, "amx_int8_2x2": 35, "vnni512": 7, "vnni256": 7, "pmadd512": 7,
                             "pmaddwd256": 7}
    # 2 AMX, bf16dot512, bf16fma256 (bf16 widened to fp32 on AVX2)
    assert len(MappingSpace(matmul(64, 64, 64, dtype="bf16"), SPR).candidates) == 4
    assert len(MappingSpace(matmul(64, 64, 64), SPR).candidates) == 2  # fma512, fma256


# -- pruning -------------------------------------------------------------------------------------------------
def without(*flags):
    return dataclasses.replace(SPR, cpu_flags=tuple(f for f in SPR.cpu_flags if f not in flags))


def kept_intrinsics(space):
    return [space.nests[i].intrinsic.name for i in space.kept]


def test_a_cpu_without_vnni_or_amx_masks_those_intrinsics():
    wl = conv2d(1, 64, 14, 14, 64, 3, 3, dtype="int8")
    target = without("avx512_vnni", "avx_vnni", "amx_int8")
    nests, verdicts = candidate_table(wl, target)
    for nest, verdict in zip(nests, verdicts):
        if nest.intrinsic.name in ("vnni512", "vnni256", "amx_int8", "amx_int8_2x2"):
            assert verdict.fate == "masked" and verdict.rule == "isa"
            assert "avx512_vnni" in verdict.reason or "amx_int8" in verdict.reason
        elif nest.intrinsic.name == "pmadd512":
            assert verdict.rule == "exact"  # pmaddubsw: not exact for 8-bit activations
        else:  # the exact AVX2 dot product takes over
            assert nest.intrinsic.name == "pmaddwd256" and verdict.rule not in ("isa", "exact")
    assert set(kept_intrinsics(MappingSpace(wl, target))) == {"pmaddwd256"}
    # below AVX2 (SSE only) no int8 intrinsic runs: refused, with the reason
    with pytest.raises(SpaceError, match="no mapping candidate of .* can run .*the CPU lacks"):
        MappingSpace(wl, dataclasses.replace(SPR, cpu_flags=("sse4_2",)))
    # bf16 on a CPU without AVX512-BF16 and AMX-BF16: widened to fp32 on the FMA; float32 is unaffected
    assert kept_intrinsics(MappingSpace(matmul(64, 64, 64, dtype="bf16"), without("avx512_bf16", "amx_bf16"))) \
        == ["bf16fma256"]
    assert kept_intrinsics(MappingSpace(matmul(64, 64, 64), without("avx512_bf16", "amx_bf16"))) \
        == ["fma512", "fma256"]


def test_a_cpu_with_avx_vnni_only_keeps_the_256_bit_vnni():
    space = MappingSpace(conv2d(1, 64, 14, 14, 64, 3, 3, dtype="int8"), without("avx512_vnni", "amx_int8"))
    assert set(kept_intrinsics(space)) == {"vnni256", "pmaddwd256"}  # the only VNNI left, and AVX2's


def test_pmaddubsw_is_masked_for_full_range_int8_because_it_saturates():
    space = MappingSpace(matmul(32, 32, 64, dtype="int8"), SPR)
    row = next(r for r in space.table if r["intrinsic"] == "pmadd512")
    assert row["fate"] == "masked" and row["rule"] == "exact" and "saturates" in row["reason"]


@pytest.mark.needs_isa("avx512bw")
def test_pmaddubsw_kernel_is_exact_only_for_7_bit_activations():
    import tvm

    from tensorgym.spaces.mapping.kernels import build_module

    wl = matmul(32, 32, 64, dtype="int8")
    nest = MappedNest(wl, Candidate(INTRINSICS["pmadd512"], (("i", ("j",)), ("r", ("k",)))))
    tiles = Config({"i": (32, 1, 1, 1), "j": (2, 1, 1, 1), "k": (16, 1), "unroll": 0, "cache_write": 1})
    lib = tvm.compile(build_module(nest, tiles, prepacked=False), target=CPU.tvm_target())
    a, b = wl.random_inputs()
    for data, exact in ((a, False), (a & 127, True)):
        args = [tvm.runtime.tensor(x) for x in (data, b, np.zeros(wl.output_shape, "int32"))]
        lib["main"](*args)
        assert (relative_error(args[-1].numpy(), wl.reference(data, b)) == 0) == exact


def test_padding_and_same_kernel_rules_prune_with_reasons():
    space = MappingSpace(all_suite_workloads()["Conv2d-ResNet18-C0-v0"].with_dtype("int8"), SPR)
    rows = {r["label"]: r for r in space.table}
    amx_rc = rows["amx_int8 i1<-y i2<-f r<-rc"]  # 3 channels on a 64-deep tile
    assert amx_rc["fate"] == "pruned" and amx_rc["rule"] == "padding" and "5 %" in amx_rc["reason"]
    assert all(r["resources"].utilisation >= MIN_UTILISATION for r in space.table if r["fate"] == "kept")
    same = rows["amx_int8 i1<-n+y+x i2<-f r<-rc+ry+rx"]  # batch 1: fusing n changes nothing
    assert same["rule"] == "same" and f"candidate {space.candidates.index('amx_int8 i1<-y+x i2<-f r<-rc+ry+rx')}" \
        in same["reason"]


def test_a_strided_1x1_conv_keeps_the_dot_candidates_whose_packing_differs():
    # rx and ry have extent 1, but fusing them gathers the strided pixels instead of packing the whole image
    space = MappingSpace(all_suite_workloads()["Conv2d-ResNet18-C7-v0"].with_dtype("int8"), SPR)
    kept = {space.candidates[i] for i in space.kept}
    assert {"vnni512 i<-f r<-rc", "vnni512 i<-f r<-rc+ry+rx"} <= kept
    nests = {n.candidate.label: n for n in space.nests}
    assert nests["vnni512 i<-f r<-rc"].activation_shape == (1, 28, 28, 128)
    assert nests["vnni512 i<-f r<-rc+ry+rx"].activation_shape == (1, 14, 14, 128)


def test_cache_and_memory_rules_prune_on_a_small_machine():
    wl = all_suite_workloads()["Conv2d-ResNet18-C11-v0"].with_dtype("int8")
    nests, verdicts = candidate_table(wl, dataclasses.replace(SPR, l2_bytes=64 * 1024))
    cached = [(n, v) for n, v in zip(nests, verdicts) if v.rule == "cache"]
    assert cached and all(n.resources.panel_bytes > 64 * 1024 and "L2" in v.reason for n, v in cached)
    assert any(v.kept for v in verdicts)  # the dot products' im2col panels fit
    # im2col unfolds (9x the activations here) past a small LLC are pruned; the NHWC packings are kept, and
    # the 2.25 MiB of weights, which every candidate reads, prune nothing
    nests, verdicts = candidate_table(wl, dataclasses.replace(SPR, l3_bytes=128 * 1024))
    memory = [(n, v) for n, v in zip(nests, verdicts) if v.rule == "memory"]
    assert memory and all(n.resources.packed_activation_bytes > 128 * 1024 and "unfolded" in v.reason
                          and n.resources.duplication >= UNFOLD_DUPLICATION for n, v in memory)
    assert any(v.kept and n.resources.packed_weight_bytes > 128 * 1024 for n, v in zip(nests, verdicts))
    with pytest.raises(SpaceError, match="no mapping candidate .* e.g."):
        MappingSpace(wl, dataclasses.replace(SPR, l2_bytes=1024))


# -- the space -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def c5():
    return MappingSpace(all_suite_workloads()["Conv2d-ResNet18-C5-v0"].with_dtype("int8"), SPR)


def test_samples_are_valid_deterministic_and_cover_the_kept_candidates(c5):
    first = c5.sample_many(np.random.default_rng(7), 1000)
    again = c5.sample_many(np.random.default_rng(7), 1000)
    assert first == again
    for config in first:
        c5.check(config)
        assert c5.verdicts[c5.candidate_of(config)].kept
    assert {c5.candidate_of(c) for c in first} == set(c5.kept)


def test_register_blocks_fit_the_register_file(c5):
    for config in c5.sample_many(np.random.default_rng(1), 300):
        nest = c5.nest(config)
        block = np.prod([config[lp.name][3] for lp in nest.spatial])
        if not nest.tile:
            assert vector_registers_needed(nest.intrinsic, block, config[nest.names["lanes"]][3]) \
                <= SPR.vector_registers == 32
    vnni = c5.candidates.index("vnni512 i<-f r<-rc")
    config = next(c for c in c5.sample_many(np.random.default_rng(2), 400) if c5.candidate_of(c) == vnni)
    too_big = config.replace(x=(1, 1, 1, 28), y=(1, 1, 1, 28))
    with pytest.raises(SpaceError, match="vector registers"):
        c5.check(too_big)


def test_bad_configs_are_refused_with_the_reason(c5):
    config = c5.restricted(c5.candidates.index("vnni512 i<-f r<-rc")).sample(np.random.default_rng(0))
    pruned = next(i for i, v in enumerate(c5.verdicts) if v.rule == "padding")
    with pytest.raises(SpaceError, match="pruned by rule 'padding'"):
        c5.check(config.replace(candidate=pruned))
    with pytest.raises(SpaceError, match="prepacked"):
        c5.check(config.replace(prepacked=1))
    with pytest.raises(SpaceError, match="multiply to its extent"):
        c5.check(config.replace(r=(1, 1)))


def test_neighbours_hop_tiles_and_switch_candidates(c5):
    config = c5.sample(np.random.default_rng(3))
    one = c5.neighbours(config, 1)
    assert config not in one and len(set(one)) == len(one)
    for n in one:
        c5.check(n)
    switched = {c5.candidate_of(n) for n in one} - {c5.candidate_of(config)}
    assert switched == set(c5.kept) - {c5.candidate_of(config)}
    two = c5.neighbours(config, 2)
    assert all(c5.candidate_of(n) == c5.candidate_of(config) for n in two) and two
    moved = c5.switch(config, c5.kept[-1])
    assert moved is None or c5.candidate_of(moved) == c5.kept[-1]


def test_hops_of_coordinates_the_candidate_lacks_are_refused(c5):
    config = next(c for c in c5.sample_many(np.random.default_rng(4), 100) if not c5.nest(c).tile)
    labels = [c.label for c in c5.coordinates]
    assert "m.1" in labels  # the AMX candidates' fused-row blocks
    assert c5.hop(config, labels.index("m.1"), +1) is None
    assert not c5.hop_mask(config)[2 * labels.index("m.1")]


def test_restricted_space_stays_in_its_candidate_and_shares_the_name(c5):
    k = c5.kept[1]
    sub = c5.restricted(k)
    assert sub.name == c5.name and sub.candidates == c5.candidates
    configs = sub.sample_many(np.random.default_rng(0), 50)
    assert {c5.candidate_of(c) for c in configs} == {k}
    for config in configs:
        c5.check(config)  # a config of the full space
    assert all(sub.candidate_of(n) == k for n in sub.neighbours(configs[0], 1))
    with pytest.raises(SpaceError, match="pruned"):
        c5.restricted(next(i for i, v in enumerate(c5.verdicts) if not v.kept))


def test_encoding_and_features_have_fixed_sizes_and_ranges(c5):
    for config in c5.sample_many(np.random.default_rng(5), 50):
        encoded = c5.encode(config)
        assert encoded.shape == (c5.encoding_size,) and 0 <= encoded.min() and encoded.max() <= 1
        assert encoded[c5.candidate_of(config)] == 1
        assert c5.features(config).shape == (len(c5.feature_names),)
        assert np.all(np.isfinite(c5.scaled_features(config)))
        normalised = c5.normalised_features(config)
        assert 0 <= normalised.min() and normalised.max() <= 1
        assert c5.generic_features(config).shape == (len(c5.generic_feature_names),)


def test_spaces_pickle_with_their_settings(c5):
    import pickle

    sub = pickle.loads(pickle.dumps(c5.restricted(c5.kept[0])))
    assert sub.only == c5.kept[0] and sub.candidates == c5.candidates


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_fp32_only_spaces_refuse_other_dtypes_clearly(dtype):
    with pytest.raises(SpaceError, match="space='mapping'"):
        TilesSpace(matmul(64, 64, 64, dtype=dtype), CPU)


def test_weights_packed_on_the_host_match_the_layout():
    wl = conv2d(1, 5, 8, 8, 20, 3, 2, padding=1, dtype="int8")
    nest = MappedNest(wl, Candidate(INTRINSICS["vnni512"], (("i", ("f",)), ("r", ("rc", "rx")))))
    _, weights = wl.random_inputs()
    packed = pack_weights(nest, weights)
    assert packed.shape == nest.weight_shape == (2, 3, 3, 16, 4)  # [F/16, R (outer), ceil(5*2/4), 16, 4]
    # element (f, c, ry, rx) sits at [f // 16, ry, (c * 2 + rx) // 4, f % 16, (c * 2 + rx) % 4]
    for f, c, ry, rx in ((0, 0, 0, 0), (17, 4, 2, 1), (19, 3, 1, 0)):
        fused = c * 2 + rx
        assert packed[f // 16, ry, fused // 4, f % 16, fused % 4] == weights[f, c, ry, rx]
    assert not packed[1, :, :, 4:, :].any()  # padded output channels 20..31


# -- kernels -------------------------------------------------------------------------------------------------
def _kept_configs(space, seed=0):
    rng = np.random.default_rng(seed)
    return [space.restricted(k).sample(rng) for k in space.kept]


def _check_here(space, configs) -> list[tuple[str, float]]:
    """Compile each config in this process, run it once on the workload's reference inputs; the failures."""
    import tvm

    from tensorgym.measure.tasks import reference_data

    builder = space.builder()
    builder.prepare_runtime()
    inputs, reference = reference_data(space.workload)
    failed = []
    for config in configs:
        lib = tvm.compile(builder.apply(config), target=CPU.tvm_target())
        args = [tvm.runtime.tensor(a) for a in builder.kernel_arguments(config, inputs)]
        lib["main"](*args)
        error = relative_error(builder.canonical_output(config, [a.numpy() for a in args]), reference)
        if not error <= space.workload.tolerance(1e-3):
            failed.append((space.describe(config), error))
    return failed


@pytest.mark.needs_isa("avx2", "fma")  # the intrinsics this CPU has: AVX2's at least
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_every_candidate_of_an_awkward_shape_matches_numpy_or_is_pruned_with_a_reason(dtype):
    space = MappingSpace(awkward(dtype), CPU)
    for row in space.table:
        assert row["fate"] == "kept" or row["reason"]
    assert len(space.kept) >= 7
    assert not _check_here(space, _kept_configs(space))


@NEEDS_AMX
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_amx_and_dot_kernels_of_a_padded_matmul_match_numpy_with_and_without_prepacking(dtype, measurer):
    wl = matmul(40, 48, 100, dtype=dtype)
    for prepacked in (False, True):
        space = MappingSpace(wl, CPU, prepacked=prepacked)
        assert any(space.nests[k].tile for k in space.kept)
        records = measurer.measure(space, _kept_configs(space, seed=1))
        assert all(r.ok for r in records), [(r.status.value, r.error[:300]) for r in records if not r.ok]
        assert space.info(records[0].config)["packing"] == ("pre-packed weights" if prepacked else "in-kernel")


@NEEDS_AMX
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_amx_conv_candidates_of_each_tile_intrinsic_match_numpy(dtype):
    space = MappingSpace(conv2d(1, 64, 9, 9, 64, 3, 3, padding=1, dtype=dtype), CPU)
    first = {}
    for k in space.kept:
        if space.nests[k].tile:
            first.setdefault(space.nests[k].intrinsic.name, k)
    assert len(first) == 2  # the 16x16 tile and the 2x2-tile intrinsic
    assert not _check_here(space, [space.restricted(k).sample(np.random.default_rng(k)) for k in first.values()])


@pytest.mark.slow
@NEEDS_AMX
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
@pytest.mark.parametrize("layer", [f"C{i}" for i in range(12)])
def test_every_candidate_of_resnet18_matches_numpy_or_is_pruned(layer, dtype, measurer):
    space = MappingSpace(all_suite_workloads()[f"Conv2d-ResNet18-{layer}-v0"].with_dtype(dtype), CPU)
    for row in space.table:
        assert row["fate"] == "kept" or (row["rule"] and row["reason"])
    records = measurer.measure(space, _kept_configs(space))
    failed = [(space.describe(r.config), r.status.value, r.error[:300]) for r in records if not r.ok]
    assert not failed
