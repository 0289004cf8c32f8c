"""Conv2d workloads in the layouts oneDNN uses (NHWC, NCHWc), in the tiles and microkernel spaces,
and the weights pre-pass of the microkernel space."""

from __future__ import annotations

import numpy as np
import pytest

from tensorgym.spaces import TilesSpace
from tensorgym.spaces.microkernel import Catalogue, EnumerationRules, MicrokernelSpace, enumerate_microkernels
from tensorgym.spaces.base import SpaceError
from tensorgym.target import local_cpu
from tensorgym.workloads import Conv2d, Workload, WorkloadError, conv2d, matmul

TARGET = local_cpu()


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.unmeasured(TARGET, enumerate_microkernels(EnumerationRules.for_target(TARGET, quick=True)))


@pytest.mark.parametrize("layout", ["NHWC", "NCHWc", "NCHW8c"])
def test_layouts_compute_the_same_convolution(layout):
    wl = conv2d(1, 32, 9, 9, 48, 3, 3, 2, 1, layout=layout)
    canonical = wl.canonical()
    data, kernel = canonical.random_inputs(0)
    laid_out = wl.layout_inputs(data, kernel)
    assert tuple(a.shape for a in laid_out) == wl.input_shapes
    np.testing.assert_allclose(wl.reference(*laid_out), wl.from_canonical_output(canonical.reference(data, kernel)))
    assert all(np.array_equal(a, b) for a, b in zip(wl.canonical_inputs(*laid_out), (data, kernel)))
    assert wl.key != canonical.key and Workload.from_json(wl.to_json()) == wl


def test_the_nchw_key_did_not_change():
    assert conv2d(1, 128, 28, 28, 128, 3, 3).key == \
        "conv2d(N=1,C=128,H=28,W=28,F=128,R=3,S=3,stride=1,padding=1,dtype=float32)"


def test_the_nchwc_block_is_part_of_the_key_and_follows_the_target():
    from tensorgym.envs.registration import with_layout
    from tensorgym.target import constructed_cpu

    base = conv2d(1, 128, 28, 28, 128, 3, 3)
    avx512 = with_layout(base, "NCHWc", constructed_cpu("znver4"))
    avx2 = with_layout(base, "NCHWc", constructed_cpu("haswell"))
    assert (avx512.channel_block, avx2.channel_block) == (16, 8)
    assert avx512.layout_name == "NCHW16c" and avx2.layout_name == "NCHW8c" and avx2 == base.with_layout("NCHW8c")
    # The 16-channel block is the key every NCHWc record had before the block was a parameter.
    assert avx512.key.endswith("layout=NCHWc)") and avx2.key.endswith("layout=NCHWc,channel_block=8)")
    assert avx2.input_shapes == ((1, 16, 28, 28, 8), (16, 16, 3, 3, 8, 8)) and avx2.output_shape == (1, 16, 28, 28, 8)
    assert Workload.from_json(avx2.to_json()) == avx2 and avx2.canonical() == base
    # A tiles space that packs an NCHW conv vectorises one register of output channels.
    assert TilesSpace(base, constructed_cpu("haswell"), packing="weights").nest.channel_block == 8
    assert TilesSpace(base, constructed_cpu("znver4"), packing="weights").nest.channel_block == 16


def test_bad_layouts_are_refused_clearly():
    with pytest.raises(WorkloadError, match="layout must be one of"):
        conv2d(1, 16, 8, 8, 16, 3, 3, layout="CHWN")
    with pytest.raises(WorkloadError, match="blocks of 16.*NHWC"):
        conv2d(1, 3, 8, 8, 16, 3, 3, layout="NCHWc")
    with pytest.raises(WorkloadError, match="NCHW8c needs input and output channels in blocks of 8"):
        conv2d(1, 12, 8, 8, 16, 3, 3, layout="NCHW8c")
    with pytest.raises(WorkloadError, match="channel_block must be one of"):
        conv2d(1, 16, 8, 8, 16, 3, 3, layout="NCHW32c")
    with pytest.raises(WorkloadError, match="NCHWc layout only"):
        Conv2d(1, 16, 8, 8, 16, 3, 3, layout="NHWC", channel_block=8)
    assert isinstance(conv2d(1, 16, 8, 8, 32, 3, 3, layout="NCHWc"), Conv2d)


@pytest.mark.parametrize("layout", ["NHWC", "NCHWc", "NCHW8c"])
def test_tiles_space_vectorises_output_channels_in_channel_last_layouts(layout, measurer):
    space = TilesSpace(conv2d(1, 16, 8, 8, 32, 3, 3, 1, 1, layout=layout), TARGET)
    assert space.loops[[lp.kind for lp in space.loops].index("reduction") - 1].name in ("f", "fi")
    records = measurer.measure(space, space.sample_many(np.random.default_rng(0), 2))
    assert all(r.ok for r in records), [r.error[:300] for r in records]


@pytest.mark.parametrize("layout, packing", [("NHWC", "in-kernel"), ("NHWC", "weights"), ("NCHWc", "weights"),
                                             ("NCHWc", "all"), ("NCHW8c", "weights"), ("NCHW", "weights")])
def test_microkernel_kernels_in_every_layout_and_packing_match_numpy(layout, packing, catalogue, measurer):
    wl = conv2d(1, 16, 10, 10, 32, 3, 3, 1, 1 if layout != "NHWC" or packing == "weights" else 0, layout=layout)
    space = MicrokernelSpace(wl, TARGET, catalogue=catalogue, packing=packing)
    config = space.sample(np.random.default_rng(3))
    record = measurer.measure(space, [config])[0]
    assert record.ok, f"{space.describe(config)}: {record.error[:500]}"
    info = space.info(config)
    assert ("pre-pass" in info["packing"]) == (packing == "weights")


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_weight_pre_pass_pads_filters_that_fill_no_whole_vector(layout, catalogue, measurer):
    space = MicrokernelSpace(conv2d(1, 16, 8, 8, 20, 3, 3, 1, 1, layout=layout), TARGET, catalogue=catalogue,
                             packing="weights")
    record = measurer.measure(space, [space.sample(np.random.default_rng(2))])[0]
    assert record.ok, record.error[:500]


def test_matmul_weights_pre_pass_matches_numpy(catalogue, measurer):
    space = MicrokernelSpace(matmul(64, 40, 32), TARGET, catalogue=catalogue, packing="weights")
    record = measurer.measure(space, [space.sample(np.random.default_rng(1))])[0]
    assert record.ok, record.error[:500]


def test_weight_packing_is_done_once_per_layer(catalogue):
    from tensorgym.spaces.microkernel import codegen

    wl = conv2d(1, 16, 8, 8, 32, 3, 3, layout="NHWC")
    space = MicrokernelSpace(wl, TARGET, catalogue=catalogue, packing="weights")
    inputs = wl.random_inputs(0)
    first = space.builder().kernel_arguments(space.sample(np.random.default_rng(0)), inputs)[1]
    again = space.builder().kernel_arguments(space.sample(np.random.default_rng(1)), inputs)[1]
    assert first is again and not first.flags.writeable  # the cached pre-pass, shared and read-only
    assert codegen.pack_conv2d_weights(wl, TARGET.vector_lanes_fp32, inputs[1]) is first


def test_unknown_packings_are_refused(catalogue):
    with pytest.raises(SpaceError, match="packing must be one of"):
        MicrokernelSpace(conv2d(1, 16, 8, 8, 32, 3, 3), TARGET, catalogue=catalogue, packing="sometimes")


@pytest.mark.parametrize("packing", ["in-kernel", "weights"])
def test_tiles_packing_vectorises_output_channels_of_nchw_convolutions(packing, measurer):
    wl = conv2d(1, 32, 9, 9, 48, 3, 3, 2, 1)
    space = TilesSpace(wl, TARGET, packing=packing)
    assert [lp.name for lp in space.loops][:5] == ["n", "y", "x", "fo", "fi"]  # fi vectorised, fo just outside
    configs = space.sample_many(np.random.default_rng(1), 2)
    assert all(np.all(np.isfinite(space.features(c))) for c in configs)
    records = measurer.measure(space, configs)
    assert all(r.ok for r in records), [r.error[:300] for r in records]
    assert ("pre-pass" in space.info(configs[0])["packing"]) == (packing == "weights")
    # A packed config is no config of the unpacked space: their records never mix.
    assert not TilesSpace(wl, TARGET).is_valid(configs[0])


def test_tiles_packing_refuses_what_it_cannot_pack():
    with pytest.raises(SpaceError, match=f"blocks of {TARGET.vector_lanes_fp32}"):
        TilesSpace(conv2d(1, 3, 9, 9, 48, 3, 3), TARGET, packing="in-kernel")
    with pytest.raises(SpaceError, match="NCHW conv2d"):
        TilesSpace(conv2d(1, 16, 9, 9, 48, 3, 3, layout="NHWC"), TARGET, packing="in-kernel")
    with pytest.raises(SpaceError, match="NCHW conv2d"):
        TilesSpace(matmul(16, 16, 16), TARGET, packing="in-kernel")
    with pytest.raises(SpaceError, match="must be one of"):
        TilesSpace(conv2d(1, 16, 9, 9, 48, 3, 3), TARGET, packing="always")


def test_tune_takes_a_layout_and_refuses_it_for_a_matmul(tmp_path, capsys):
    from tensorgym.cli import main

    db = str(tmp_path / "r.db")
    assert main(["tune", "tensorgym/Matmul-v0", "--shape", "M=8,N=8,K=8", "--layout", "NHWC", "--db", db,
                 "--budget", "1", "--no-vendor", "-q"]) == 2
    assert "only conv2d workloads have a layout" in capsys.readouterr().err
    assert main(["tune", "tensorgym/Conv2d-v0", "--shape", "C=16,H=6,F=16,R=3", "--layout", "NCHWc", "--db", db,
                 "--budget", "1", "--no-vendor", "-q"]) == 0
    assert "NCHWc" in capsys.readouterr().out
