"""The microkernel space: selections, λ-combinations, exact coverage, validity, kernels vs NumPy."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from tensorgym.spaces.microkernel import (
    Catalogue, CatalogueEntry, CatalogueMissing, EnumerationRules, Microkernel, enumerate_microkernels,
)
from tensorgym.spaces import Config, SpaceError
from tensorgym.spaces.microkernel import LAMBDA, MicrokernelSpace
from tensorgym.spaces.microkernel.codegen import (
    border_bodies, border_cases, border_taps, build_prim_func, pack_conv2d, unpack_conv2d,
)
from tensorgym.suites import SUITES
from tensorgym.target import local_cpu
from tensorgym.workloads import Conv2d, conv2d, matmul

TARGET = local_cpu()
V = TARGET.vector_lanes_fp32


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    """The quick candidates, all kept (no measurement needed to explore the space)."""
    return Catalogue.unmeasured(TARGET, enumerate_microkernels(EnumerationRules.for_target(TARGET, quick=True)))


# Awkward extents: 7, 17, 34, 68, primes; output channels that are not a multiple of the vector width.
AWKWARD = [
    conv2d(1, 3, 7, 7, 16, 3, 3, 1, "same", name="7x7"),
    conv2d(1, 5, 17, 17, 20, 3, 3, 1, "same", name="17x17 F20"),
    conv2d(1, 4, 34, 34, 16, 1, 1, 1, "same", name="34x34"),
    conv2d(1, 2, 68, 68, 16, 3, 3, 2, "same", name="68x68 stride 2"),
    conv2d(1, 3, 13, 11, 37, 3, 3, 1, 0, name="13x11 prime, no pad"),
    conv2d(2, 3, 7, 7, 16, 1, 1, 1, 0, name="batch 2"),
    conv2d(1, 16, 17, 13, 32, 3, 3, 1, "same", name="17x13 weights packed by shuffles"),
    conv2d(1, 4, 23, 23, 16, 7, 7, 2, 3, name="7x7 filter, stride 2, padding 3"),
    matmul(37, 50, 29, name="primes"),
    matmul(68, 17, 13, name="68x17"),
]


def visits(space: MicrokernelSpace, config: Config) -> np.ndarray:
    """How often the config's loop nest computes each (output, reduction) point, walked in Python."""
    plan = space.builder().plan(config)
    dims = space.dims
    counts = np.zeros([space.extents[d] for d in dims], dtype=np.int32)
    size = dict(plan.sizes)
    reuse_dim, comp = space.roles["reuse"], space.roles["comp"]
    stride: dict[int, int] = {}
    unit = {d: size.get(d, 1) for d in dims}
    unit[reuse_dim] *= plan.reuse
    if plan.combo:
        h1, a, h2, b = plan.combo
        unit[comp] = a * h1 + b * h2
    for pos in range(len(plan.stack) - 1, -1, -1):
        d, trips = plan.stack[pos]
        if d != LAMBDA:
            stride[pos] = unit[d]
            unit[d] *= trips

    def walk(pos: int, base: dict[str, int], h: int) -> None:
        if pos == len(plan.stack):
            extent = {d: size.get(d, 1) for d in dims}
            extent[comp] = h
            extent[reuse_dim] = size.get(reuse_dim, 1) * plan.reuse
            counts[tuple(slice(base[d], base[d] + extent[d]) for d in dims)] += 1
            return
        d, trips = plan.stack[pos]
        if d == LAMBDA:
            h1, a, h2, b = plan.combo
            for i in range(a):
                walk(pos + 1, {**base, comp: base[comp] + i * h1}, h1)
            for i in range(b):
                walk(pos + 1, {**base, comp: base[comp] + a * h1 + i * h2}, h2)
            return
        for i in range(trips):
            walk(pos + 1, {**base, d: base[d] + i * stride[pos]}, h)

    walk(0, {d: 0 for d in dims}, size.get(comp, 1))
    return counts


@pytest.mark.parametrize("workload", AWKWARD, ids=lambda w: w.name)
def test_sampled_configs_cover_the_iteration_space_exactly_once(workload, catalogue):
    space = MicrokernelSpace(workload, TARGET, catalogue=catalogue)
    rng = np.random.default_rng(0)
    for _ in range(40):
        config = space.sample(rng)
        space.check(config)
        assert (visits(space, config) == 1).all(), space.describe(config)


def test_lambda_combinations_found_when_no_single_size_divides(catalogue):
    wl = SUITES["YOLO-9000"]["Y9"]  # 17x17 outputs
    space = MicrokernelSpace(wl, TARGET, catalogue=catalogue)
    assert space.selections and all(s.combo is not None for s in space.selections)
    for s in space.selections:
        h1, a, h2, b = s.combo
        assert h1 < h2 and a >= 1 and b >= 1 and wl.OH % (a * h1 + b * h2) == 0
        assert 17 % h1 and 17 % h2  # neither size alone divides 17
    # 34 = 2*11 + 12 (seed 003's example) is among the R5-like 34x34 combinations
    space34 = MicrokernelSpace(conv2d(1, 4, 34, 34, 32, 3, 3, 1, "same"), TARGET, catalogue=catalogue)
    assert any(s.combo == (11, 2, 12, 1) for s in space34.selections)
    r5 = MicrokernelSpace(SUITES["ResNet-50"]["R5"], TARGET, catalogue=catalogue)  # 28 rows: both kinds
    assert any(s.combo is None for s in r5.selections) and any(s.combo for s in r5.selections)


def test_sampler_is_deterministic_and_covers_singles_and_combinations(catalogue):
    space = MicrokernelSpace(SUITES["ResNet-50"]["R5"], TARGET, catalogue=catalogue)
    a = [space.sample(np.random.default_rng(7)) for _ in range(3)]
    b = [space.sample(np.random.default_rng(7)) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(1)
    draws = [space.sample(rng) for _ in range(200)]
    assert any(len(c["h"]) == 1 for c in draws) and any(len(c["h"]) == 4 for c in draws)
    # tensorgym's parallel rule: the outermost loops of almost every draw split evenly over the cores
    even = 0
    for c in draws:
        stack = space.stack_of(c)
        fused = int(np.prod([t for _, t in stack[: c["parallel"]]]))
        even += c["parallel"] > 0 and fused % TARGET.num_cores == 0
    assert even >= 0.9 * len(draws)


def test_check_rejects_invalid_configs(catalogue):
    space = MicrokernelSpace(conv2d(1, 4, 34, 34, 32, 3, 3, 1, "same"), TARGET, catalogue=catalogue)
    config = space.sample(np.random.default_rng(3))
    space.check(config)
    with pytest.raises(SpaceError, match="knobs"):
        space.check(Config({k: v for k, v in config.items() if k != "parallel"}))
    with pytest.raises(SpaceError, match="reuse"):
        space.check(config.replace(reuse=7))
    with pytest.raises(SpaceError, match="prepacked"):  # in-kernel and pre-packed kernels are distinct records
        space.check(config.replace(prepacked=1))
    with pytest.raises(SpaceError, match="not a selection"):
        space.check(config.replace(kernel=(9, 9, 9, 9, 9)))
    stack = space.stack_of(config)
    with pytest.raises(SpaceError):
        space.check(config.replace(tiles=space.flat_tiles(stack[1:])))  # drops a loop: not covered
    # a parallel reduction loop, a misplaced λ, a tile below the λ
    def loops(*pairs):
        return [(d, t) for d, t in pairs if t > 1 or d == LAMBDA]

    combo = next(s for s in space.selections if s.combo and s.extent_h == 34)
    q = space.quotients(combo)
    ok = space.make_config(combo, q["rc"], loops(("x", q["x"]), ("f", q["f"]), (LAMBDA, 1), ("ry", 3), ("rx", 3)), 1)
    space.check(ok)
    with pytest.raises(SpaceError, match="parallel"):
        space.check(ok.replace(tiles=space.flat_tiles(loops(("ry", 3), ("x", q["x"]), ("f", q["f"]), (LAMBDA, 1),
                                                             ("rx", 3))), parallel=1))
    with pytest.raises(SpaceError, match="λ"):
        space.check(ok.replace(tiles=ok["tiles"] + (-1, 1)))
    half = next(s for s in space.selections if s.combo and s.extent_h == 17)
    qh = space.quotients(half)
    bad = space.make_config(half, qh["rc"], loops(("x", qh["x"]), ("f", qh["f"]), (LAMBDA, 1), ("y", 2), ("ry", 3),
                                                  ("rx", 3)), 1)
    with pytest.raises(SpaceError, match="innermost"):
        space.check(bad)


def test_neighbours_are_valid_and_distinct(catalogue):
    space = MicrokernelSpace(SUITES["ResNet-50"]["R5"], TARGET, catalogue=catalogue)
    config = space.sample(np.random.default_rng(2))
    one = space.neighbours(config)
    assert one and config not in one and len(set(one)) == len(one)
    for n in one:
        space.check(n)
    two = space.neighbours(config, hops=2)
    assert two and not (set(two) & set(one)) and config not in two


def test_encoding_and_pickling(catalogue):
    space = MicrokernelSpace(SUITES["BERT"]["M3"], TARGET, catalogue=catalogue, prepacked=True)
    rng = np.random.default_rng(0)
    configs = [space.sample(rng) for _ in range(20)]
    vectors = np.array([space.encode(c) for c in configs])
    assert vectors.shape == (20, space.encoding_size)
    assert vectors.min() >= 0.0 and vectors.max() <= 1.0
    assert len({v.tobytes() for v in vectors}) == len(set(configs))
    clone = pickle.loads(pickle.dumps(space))
    assert clone.selections == space.selections and clone.prepacked
    assert [clone.encode(c).tolist() for c in configs] == vectors.tolist()
    assert space.info(configs[0])["packing"] == "pre-packed"
    in_kernel = MicrokernelSpace(SUITES["BERT"]["M3"], TARGET, catalogue=catalogue)
    assert in_kernel.info(in_kernel.sample(rng))["packing"] == "in-kernel"
    with pytest.raises(SpaceError, match="prepacked"):  # a config of the pre-packed space is not one of this
        in_kernel.info(configs[0])


def test_threshold_filters_the_catalogue(catalogue):
    slow, fast = Microkernel(2, 7), Microkernel(2, 8)
    cat = dataclasses.replace(Catalogue.unmeasured(TARGET, [slow, fast]), peak_gflops=100.0, threshold=0.8,
                              entries=(CatalogueEntry(slow, "ok", 50.0), CatalogueEntry(fast, "ok", 90.0)))
    space = MicrokernelSpace(matmul(64, 32, 16), TARGET, catalogue=cat)
    assert space.microkernels == (fast,) and space.source == "catalogue"
    # when nothing kept fits, slower calibrated microkernels are used (and then a trivial fallback)
    space7 = MicrokernelSpace(matmul(7, 32, 16), TARGET, catalogue=cat)
    assert space7.source == "below-threshold" and {s.kernel for s in space7.selections} == {slow}
    space5 = MicrokernelSpace(matmul(5, 32, 16), TARGET, catalogue=cat)
    assert space5.source == "fallback" and space5.selections


def test_missing_catalogue_raises_with_instructions(tmp_path):
    """The space only loads a catalogue: the first-use calibration is the env's (tests/test_microkernels.py)."""
    with pytest.raises(CatalogueMissing, match="tensorgym microkernels calibrate"):
        MicrokernelSpace(SUITES["ResNet-50"]["R5"], TARGET, cache_dir=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("prepacked", [False, True], ids=["in-kernel", "pre-packed"])
def test_generated_kernels_match_numpy(prepacked, catalogue, measurer):
    """Real build, check against NumPy and timing of sampled configs on awkward shapes."""
    rng = np.random.default_rng(11)
    for wl in AWKWARD:
        space = MicrokernelSpace(wl, TARGET, catalogue=catalogue, prepacked=prepacked)
        configs = list({space.sample(rng) for _ in range(3)})
        records = measurer.measure(space, configs)
        for config, record in zip(configs, records):
            assert record.ok, f"{wl.name}: {space.describe(config)}: {record.status} {record.error[:400]}"
            assert record.gflops > 0


def test_one_generated_kernel_matches_numpy(catalogue, measurer):
    """The fast-suite version: one λ-combination on a prime-sized conv, checked by the real measurer."""
    wl = conv2d(1, 3, 17, 17, 20, 3, 3, 1, "same")
    space = MicrokernelSpace(wl, TARGET, catalogue=catalogue)
    config = space.sample(np.random.default_rng(5))
    assert len(config["h"]) == 4  # 17 rows need a combination
    record = measurer.measure(space, [config])[0]
    assert record.ok, record.error


def test_border_taps_and_cases():
    """Which taps a block reads from the input, and the bodies a call may take along one axis."""
    assert border_taps(None, 0, 3, 1, 7) == [0, 1, 2]  # unknown origin: every tap
    assert border_taps(-1, 0, 3, 1, 7) == [1, 2]  # the first row's tap 0 lies on the top border
    assert border_taps(4, 2, 2, 1, 7) == [0]  # the second row's tap 2 reads row 7, past the bottom
    assert border_taps(-3, 1, 3, 2, 23) == [1, 2]  # stride 2: rows read -2, 0, 2
    assert border_cases(-1, 0, 3, 3, 7, 3, 1, 7) == [(None, None)]  # no padding: one full body
    assert border_cases(-1, 1, 7, 3, 7, 3, 1, 7) == [(None, -1)]  # a constant origin: one specialised body
    from tvm import tirx

    y = tirx.Var("y", "int32")
    # 3x3, padding 1, blocks of 2 rows of a 28-row output: the first block (origin -1) and the last (origin 25)
    cases = border_cases(y - 1, 1, 2, 3, 28, 3, 1, 28)
    assert [t for _, t in cases] == [-1, 25, None]
    assert cases[-1][0] is None and all(c is not None for c, _ in cases[:-1])


PADDED = [wl for wl in AWKWARD if isinstance(wl, Conv2d) and wl.padding == 1]


@pytest.mark.parametrize("workload", PADDED, ids=lambda w: w.name)
def test_kernels_never_multiply_the_zero_border(workload, catalogue, monkeypatch):
    """A pre-packed input whose zero border holds NaN instead: every tap on it is skipped (as oneDNN skips them),
    so the output stays finite and matches NumPy. With padding 1 and no budget on the border bodies, every
    config skips them all."""
    import tvm

    from tensorgym.spaces.microkernel import codegen

    monkeypatch.setattr(codegen, "BORDER_FMA_BUDGET", 10**9)
    rng = np.random.default_rng(7)
    space = MicrokernelSpace(workload, TARGET, catalogue=catalogue, prepacked=True)
    data, kernel = workload.random_inputs(seed=3)
    packed, packed_kernel = pack_conv2d(workload, V, data, kernel)
    packed[:, [0, -1]] = np.nan
    packed[:, :, [0, -1]] = np.nan
    expected = workload.reference(data, kernel)
    for config in {space.sample(rng) for _ in range(3)}:
        module = tvm.IRModule({"main": build_prim_func(workload, space.builder().plan(config))})
        kernel_fn = tvm.compile(module, target=TARGET.tvm_target())["main"]
        out = tvm.runtime.tensor(np.zeros((workload.N, space.extents["f"], workload.OH, workload.OW, V), "float32"))
        kernel_fn(tvm.runtime.tensor(packed), tvm.runtime.tensor(packed_kernel), out)
        result = unpack_conv2d(workload, out.numpy())
        assert np.isfinite(result).all(), f"{space.describe(config)} multiplied a border tap"
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-3)


def test_border_bodies_stay_within_their_budget():
    """A body per border position while they fit the FMA budget, else per border row and column (a corner call
    takes its row's), else per border row, else none; the full body always last."""
    from tvm import tirx

    y, x = tirx.Var("y", "int32"), tirx.Var("x", "int32")
    rows = border_cases(y - 1, 1, 2, 3, 28, 3, 1, 28)  # first tap's row -1 (top), 25 (bottom), else inside
    cols = border_cases(x - 1, 1, 7, 3, 14, 3, 1, 14)  # -1 (left), 6 (right)
    fmas = {-1: 2, 25: 2, 6: 2, None: 3}

    def count(r, c):
        return fmas[r] * fmas[c]

    def bodies(budget):
        return [first for _, first in border_bodies(rows, cols, count, budget)]

    corners = [(-1, -1), (-1, 6), (25, -1), (25, 6)]
    edges = [(-1, None), (25, None), (None, -1), (None, 6)]
    assert bodies(40) == corners + edges + [(None, None)]  # 4 x 4 + 4 x 6 FMAs
    assert bodies(39) == edges + [(None, None)]
    assert bodies(23) == edges[:2] + [(None, None)]
    assert bodies(11) == [(None, None)]
    # a constant row origin: no row branches, the column bodies specialised to it
    assert [first for _, first in border_bodies([(None, -1)], cols, lambda r, c: 1, 2)] == [(-1, -1), (-1, 6),
                                                                                          (-1, None)]
