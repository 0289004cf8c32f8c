"""The CUDA target without a GPU: the H100 description, the GPU tiles space (sketch, limits, hops, features),
CUDA source generation, nvcc, the CUDA runner's refusal, and the agents on the GPU space.

Tests marked ``gpu`` need an NVIDIA GPU (``pytest -m gpu``); they are in tests/test_cuda_gpu.py.
"""

from __future__ import annotations

import dataclasses
import shutil
import time

import gymnasium as gym
import numpy as np
import pytest
from fakes import SyntheticEvaluator, peak_at, run_search

from tensorgym.agents.dgd import DGDAgent
from tensorgym.agents.ga import GAAgent
from tensorgym.agents.optuna_agent import OptunaAgent
from tensorgym.agents.random_search import RandomAgent
from tensorgym.catalog import make_space
from tensorgym.config import Config
from tensorgym.cuda.driver import GpuUnavailable, describe_gpu
from tensorgym.measure.contention import ContentionProbe, CpuSnapshot
from tensorgym.spaces.base import SpaceError
from tensorgym.spaces.tiles import TilesSpace
from tensorgym.spaces.tiles.gpu_features import GPU_FEATURE_NAMES, GPUHardware, GPUTiling, gpu_features
from tensorgym.spaces.tiles.gpu_space import GpuTilesSpace
from tensorgym.suites import SUITES
from tensorgym.target import KNOWN_GPUS, TargetError, cuda_target, local_cpu, resolve_target
from tensorgym.tuner import Tuner
from tensorgym.workloads import conv2d, matmul

H100 = cuda_target("h100")
R5 = SUITES["ResNet-50"]["R5"]
M3 = SUITES["BERT"]["M3"]
FAST_MODEL = {"num_boost_round": 50}


def _has_gpu() -> bool:
    try:
        describe_gpu(0)
        return True
    except GpuUnavailable:
        return False


needs_no_gpu = pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the no-GPU errors do not apply")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


# -- the target -----------------------------------------------------------------------------------
def test_h100_description_keys_its_own_records():
    assert H100.kind == "cuda" and H100.device.arch == "sm_90" and H100.device.num_sms == 132
    assert "H100" in H100.label and "132 SMs" in H100.label
    assert H100.fingerprint != local_cpu().fingerprint
    assert cuda_target("a100").fingerprint != H100.fingerprint
    with_driver = dataclasses.replace(H100, device=dataclasses.replace(H100.device, driver="580.159.04"))
    assert with_driver.fingerprint != H100.fingerprint  # the driver is part of what keys a record
    # The host CPU does not time GPU kernels, so it does not change a CUDA target's fingerprint.
    assert dataclasses.replace(H100, cpu_model="another host").fingerprint == H100.fingerprint
    assert H100.to_json()["device"]["compute_capability"] == (9, 0)
    with pytest.raises(TargetError, match="unknown GPU"):
        cuda_target("rtx9090")


def test_tvm_target_of_an_h100():
    target = H100.tvm_target()
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90"
    assert int(target.attrs["max_shared_memory_per_block"]) == 227 * 1024  # the opt-in limit: dynamic smem
    assert int(target.attrs["max_threads_per_block"]) == 1024


def test_the_local_gpu_becomes_a_cuda_target(monkeypatch):
    """What the driver and nvcc report is what the target holds (here without a GPU: both are stand-ins)."""
    import tensorgym.cuda.driver as driver
    import tensorgym.cuda.nvcc as nvcc
    from tensorgym.target import local_cuda

    h100 = dataclasses.asdict(KNOWN_GPUS["h100"])
    reported = {k: v for k, v in h100.items() if k not in ("toolkit", "max_registers_per_thread")}
    monkeypatch.setattr(driver, "describe_gpu", lambda ordinal: dict(reported, driver="580.159.04 (CUDA 13.0)"))
    monkeypatch.setattr(nvcc, "nvcc_version", lambda: "13.0.88")
    local_cuda.cache_clear()
    try:
        target = local_cuda(0)
    finally:
        local_cuda.cache_clear()
    assert target.kind == "cuda" and target.device.name == "NVIDIA H100 80GB HBM3"
    assert target.device.driver == "580.159.04 (CUDA 13.0)" and target.device.toolkit == "13.0.88"
    assert target.fingerprint != H100.fingerprint  # the driver and toolkit key records too


@needs_no_gpu
def test_cuda_without_a_gpu_is_one_clear_error(tmp_path):
    with pytest.raises(TargetError, match="target='cuda' is not usable here: .*driver"):
        resolve_target("cuda")
    with pytest.raises(TargetError, match="not usable here"):
        gym.make("Matmul-BERT-M3-v0", target="cuda", db=str(tmp_path / "r.db"))
    with pytest.raises(TargetError, match="unknown target"):
        resolve_target("opencl")


@needs_no_gpu
def test_the_cuda_runner_refuses_to_time_without_the_gpu(tmp_path):
    """Kernels for a described GPU can be built anywhere; timing them without it writes no record."""
    from tensorgym.database import Database
    from tensorgym.evaluator import Evaluator
    from tensorgym.measure import Measurer

    space = make_space("tiles", matmul(64, 64, 64), H100)
    with Measurer(H100, builders=1) as measurer, Database(tmp_path / "r.db") as db:
        with pytest.raises(TargetError, match="cannot time kernels for cuda:NVIDIA H100"):
            Evaluator(space, db, measurer).evaluate([space.sample(np.random.default_rng(0))])
        assert len(db) == 0


# -- the GPU tiles space ---------------------------------------------------------------------------
def test_the_tiles_space_of_a_cuda_target_is_the_gpu_sketch():
    space = make_space("tiles", R5, H100)
    assert isinstance(space, GpuTilesSpace) and isinstance(space, TilesSpace) and space.name == "tiles"
    # f, y, x: levels 1-4; rc, ry, rx: levels 1-2 (n has extent 1); and unroll.
    assert len(space.coordinates) == 3 * 4 + 3 * 2 + 1
    assert space.unroll_choices == (0, 16, 64, 512, 1024)  # Ansor's GPU choices
    assert len(make_space("tiles", M3, H100).coordinates) == 2 * 4 + 2 + 1
    assert space.feature_names == GPU_FEATURE_NAMES
    with pytest.raises(SpaceError, match="targets 'llvm'"):
        TilesSpace(R5, H100)
    with pytest.raises(SpaceError, match="CUDA target"):
        GpuTilesSpace(R5, local_cpu())


def test_make_space_checks_options_against_the_targets_tiles_space():
    from tensorgym.errors import InvalidArgumentError

    assert make_space("tiles", M3, H100, max_vthread=4).max_vthread == 4
    with pytest.raises(InvalidArgumentError, match="no option packing.*max_vthread"):
        make_space("tiles", R5, H100, packing="weights")  # the CPU's NCHWc packing has no GPU counterpart
    with pytest.raises(InvalidArgumentError, match="no option max_vthread.*packing"):
        make_space("tiles", R5, local_cpu(), max_vthread=4)
    # dtypes: the GPU sketch takes float16 and bf16 (summed in fp32); the CPU tiles space refuses them
    assert make_space("tiles", M3.with_dtype("bf16"), H100).element_bytes == 2
    with pytest.raises(SpaceError, match="tunes float32 kernels"):
        make_space("tiles", M3.with_dtype("float16"), local_cpu())
    with pytest.raises(SpaceError, match="NCHW conv2d"):
        make_space("tiles", dataclasses.replace(R5, layout="NHWC"), H100)


def test_tune_on_cuda_without_a_gpu_is_one_line(tmp_path, capsys):
    from tensorgym.cli import main

    assert main(["tune", "Matmul-BERT-M3-v0", "--target", "cuda", "--db", str(tmp_path / "r.db")]) == 2
    assert "not usable here" in capsys.readouterr().err
    assert main(["tune", "Matmul-BERT-M3-v0", "--target", "cuda", "--rpc", "127.0.0.1:9190/x",
                 "--db", str(tmp_path / "r.db")]) == 2
    assert "does not combine with --target cuda" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()


def test_resources_of_a_hand_tiled_matmul():
    space = make_space("tiles", matmul(512, 512, 512), H100)
    config = Config({"i": (8, 1, 8, 4, 2), "j": (8, 1, 16, 2, 2), "k": (64, 4, 2), "unroll": 64})
    need = space.resources(config)
    assert need["threads"] == 8 * 16 and need["blocks"] == 64 and need["vthreads"] == 1
    assert need["shared_bytes"] == 4 * (64 * 8 + 8 * 64)  # A and B tiles of one stage, fp32
    assert need["registers"] == 8 * 4 + 8 + 4 + 20  # accumulators + A column + B row + addresses
    assert space.limit_violations(config) == []
    half = make_space("tiles", matmul(512, 512, 512, dtype="float16"), H100)
    assert half.resources(config)["shared_bytes"] == 2 * (64 * 8 + 8 * 64)


def test_limits_come_from_the_device():
    space = make_space("tiles", matmul(1024, 1024, 1024), H100)
    too_many_threads = Config({"i": (1, 1, 64, 16, 1), "j": (16, 1, 32, 2, 1), "k": (1024, 1, 1), "unroll": 0})
    assert any("2048 threads" in p for p in space.limit_violations(too_many_threads))
    with pytest.raises(SpaceError, match="2048 threads per block"):
        space.check(too_many_threads)
    too_few = Config({"i": (64, 1, 4, 4, 1), "j": (64, 1, 4, 4, 1), "k": (1024, 1, 1), "unroll": 0})
    assert any("16 threads" in p for p in space.limit_violations(too_few))
    # 128 x 128 tiles with a 256-deep K stage: 256 KiB of fp32 shared memory, over the H100's 227 KiB.
    big = Config({"i": (8, 1, 16, 8, 1), "j": (8, 1, 16, 8, 1), "k": (4, 256, 1), "unroll": 0})
    assert any("shared memory" in p for p in space.limit_violations(big))
    # 64 KiB fits an H100 (opt-in 227 KiB) but not a GPU limited to 48 KiB per block.
    fits = Config({"i": (8, 1, 16, 8, 1), "j": (8, 1, 16, 8, 1), "k": (16, 64, 1), "unroll": 0})
    assert space.limit_violations(fits) == [] and space.shared_scope(fits) == "shared.dyn"
    small = dataclasses.replace(KNOWN_GPUS["h100"], max_shared_memory_per_block_optin=48 * 1024)
    assert any("shared memory" in p for p in make_space("tiles", matmul(1024, 1024, 1024), cuda_target(small))
               .limit_violations(fits))
    registers = Config({"i": (2, 8, 8, 8, 1), "j": (16, 1, 16, 4, 1), "k": (1024, 1, 1), "unroll": 0})
    assert any("registers" in p for p in space.limit_violations(registers))


@pytest.mark.parametrize("workload", [R5, M3], ids=["R5", "M3"])
def test_samples_hops_and_masks_stay_within_the_limits(workload):
    space = make_space("tiles", workload, H100)
    gpu = H100.device
    rng = np.random.default_rng(0)
    configs = space.sample_many(rng, 40)
    assert len(configs) == 40
    for config in configs[:10]:
        need = space.resources(config)
        assert gpu.warp_size <= need["threads"] <= gpu.max_threads_per_block and need["vthreads"] <= 8
        assert need["shared_bytes"] <= gpu.max_shared_memory_per_block_optin
        mask = space.hop_mask(config)
        for action, allowed in enumerate(mask):
            coordinate, down = divmod(action, 2)
            hopped = space.hop(config, coordinate, -1 if down else 1)
            assert (hopped is not None) == allowed
            if hopped is not None:
                space.check(hopped)
        for neighbour in space.neighbours(config, 2):
            space.check(neighbour)


def test_features_are_seed_000s_for_the_targets_gpu():
    space = make_space("tiles", M3, H100)
    config = space.sample(np.random.default_rng(3))
    hardware = GPUHardware.from_target(H100)
    assert hardware.num_sms == 132 and hardware.shared_memory_per_sm == 228 * 1024
    assert hardware.max_warps_per_sm == 64 and hardware.max_threads_per_sm == 2048
    expected = gpu_features(GPUTiling(M3, {lp.name: config[lp.name] for lp in M3.loops}), hardware)
    np.testing.assert_allclose(space.features(config), expected)
    scaled, normalised = space.scaled_features(config), space.normalised_features(config)
    assert scaled.shape == normalised.shape == (7,)
    assert np.all((normalised >= 0) & (normalised <= 1))
    np.testing.assert_allclose(scaled[3], np.log2(1 + expected[3]))  # ILP on a log scale
    assert len(space.generic_features(config)) == len(space.generic_feature_names)


# -- CUDA source ------------------------------------------------------------------------------------
def test_cuda_source_and_launch_configuration_of_a_matmul():
    space = make_space("tiles", matmul(256, 256, 256), H100)
    config = Config({"i": (8, 2, 8, 2, 1), "j": (4, 1, 16, 2, 2), "k": (32, 4, 2), "unroll": 64})
    kernel = space.builder().cuda_kernel(config)
    need = space.resources(config)
    assert kernel.output == "cubin" and kernel.gencode == ("arch=compute_90,code=sm_90",)
    assert kernel.grid == (need["blocks"], 1, 1) and kernel.block == (need["threads"], 1, 1)
    assert f"__launch_bounds__({need['threads']})" in kernel.source and kernel.entry in kernel.source
    assert kernel.arguments == (0, 1, 2)  # A_ptr, B_ptr, C_ptr: already in kernel_arguments order
    assert kernel.dynamic_shared_bytes == 0 and "__shared__" in kernel.source


def test_cuda_source_of_a_padded_conv_and_fp16():
    space = make_space("tiles", conv2d(1, 16, 14, 14, 32, 3, 3), H100)
    config = space.sample(np.random.default_rng(5))
    kernel = space.builder().cuda_kernel(config)
    # TVM orders pointer parameters by buffer name: conv_ptr, data_ptr, kernel_ptr -> output, data, weights.
    assert kernel.arguments == (2, 0, 1)
    assert kernel.grid[0] == space.resources(config)["blocks"]
    half = make_space("tiles", matmul(128, 128, 128, dtype="float16"), H100)
    source = half.builder().cuda_kernel(half.sample(np.random.default_rng(0))).source
    assert "half" in source and "float* __restrict__ C_ptr" in source  # fp16 inputs, fp32 output


def test_large_shared_tiles_use_dynamic_shared_memory():
    space = make_space("tiles", matmul(1024, 1024, 1024), H100)
    config = Config({"i": (8, 1, 16, 8, 1), "j": (8, 1, 16, 8, 1), "k": (16, 64, 1), "unroll": 0})
    kernel = space.builder().cuda_kernel(config)
    assert kernel.dynamic_shared_bytes == space.resources(config)["shared_bytes"] == 64 * 1024
    assert "extern __shared__" in kernel.source


@needs_nvcc
def test_nvcc_compiles_a_cubin_and_caches_it(tmp_path, monkeypatch):
    from tensorgym.cuda.nvcc import compile_cuda

    monkeypatch.setenv("TENSORGYM_CUDA_CACHE", str(tmp_path))
    space = make_space("tiles", matmul(128, 128, 128), H100)
    kernel = space.builder().cuda_kernel(space.sample(np.random.default_rng(2)))
    built = compile_cuda(kernel.source, output="cubin", gencode=kernel.gencode, flags=kernel.flags)
    image = open(built.path, "rb").read()
    assert image[:4] == b"\x7fELF" and f".text.{kernel.entry}".encode() in image
    assert built.resources[kernel.entry]["registers"] > 0
    again = compile_cuda(kernel.source, output="cubin", gencode=kernel.gencode, flags=kernel.flags)
    assert again.path == built.path and again.seconds == 0.0


@needs_nvcc
def test_the_builder_writes_a_manifest(tmp_path, monkeypatch):
    import json

    from tensorgym.measure.cuda_tasks import build

    monkeypatch.setenv("TENSORGYM_CUDA_CACHE", str(tmp_path / "cache"))
    space = make_space("tiles", conv2d(1, 8, 8, 8, 16, 3, 3), H100)
    config = space.sample(np.random.default_rng(1))
    manifest = json.loads(open(build(space.builder(), config, str(tmp_path))["path"]).read())
    assert manifest["output"] == "cubin" and manifest["arguments"] == [2, 0, 1]
    assert manifest["block"][0] == space.resources(config)["threads"]
    assert open(manifest["path"], "rb").read(4) == b"\x7fELF"


# -- agents on the GPU space -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_space():
    return make_space("tiles", matmul(256, 512, 256), H100)


def _tuner(space, budget):
    perf = peak_at(space, space.sample(np.random.default_rng(42)))
    return Tuner(SyntheticEvaluator(space, perf), budget=budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("agent", [
    RandomAgent(batch_size=8),
    GAAgent(population=64, generations=2, batch_size=16, num_warmup_sample=16, model_options=FAST_MODEL),
    GAAgent(features="af", population=64, generations=2, batch_size=16, num_warmup_sample=16,
            model_options=FAST_MODEL),
    DGDAgent(initial_samples=16, model_options=FAST_MODEL),
    OptunaAgent(),
], ids=["random", "ga", "ga-af", "dgd-af", "optuna"])
def test_agents_search_the_gpu_space_within_its_limits(gpu_space, agent):
    tuner = _tuner(gpu_space, 40)
    result = run_search(agent, tuner)
    assert len(result.trials) == 40
    for trial in result.trials:
        gpu_space.check(trial.config)  # every measured config fits the H100
    assert result.best_gflops > 0


def test_ga_uses_ansors_gpu_mutation_rules(gpu_space):
    from tensorgym.agents.ga import ANSOR_GPU_MUTATION_WEIGHTS, default_mutation_weights

    assert default_mutation_weights(gpu_space) == ANSOR_GPU_MUTATION_WEIGHTS == {"tile_size": 0.90, "unroll": 0.10}
    assert "cache_write" not in gpu_space.scalar_knobs


# -- the runner's plumbing, on a GPU simulated with NumPy ----------------------------------------------
class _SimulatedGpu:
    """Device memory as NumPy arrays; a "kernel" computes the workload with NumPy from its pointer arguments,
    read in the order TVM gives a kernel's parameters (sorted buffer names). Checks what run_cuda does
    around the driver: arguments, their order, the check, the protocol, the clocks."""

    def __init__(self, workload, forget_output=False):
        self.workload, self.forget_output = workload, forget_output
        self.memory: dict[int, np.ndarray] = {}
        self.clocks = type("Clocks", (), {"read": staticmethod(lambda: {"sm_clock_mhz": 1980.0})})()
        self.flushes = 0
        self.eager_timings = 0

    def upload(self, array):
        self.memory[len(self.memory) + 1] = np.array(array, copy=True)
        return len(self.memory)

    def download(self, pointer, like):
        return self.memory[pointer].copy()

    def free(self, pointer):
        pass

    def synchronize(self):
        pass

    def load(self, cubin, name, dynamic_shared_bytes):
        return "module", "function"

    def unload(self, module):
        pass

    def launcher(self, function, grid, block, dynamic_shared_bytes, pointers):
        buffers = [p.name for p in self.workload.te_func().params]  # inputs..., output
        names = sorted(buffers)  # TVM's kernel parameter order

        def launch():
            arrays = dict(zip(names, (self.memory[p] for p in pointers)))
            if not self.forget_output:
                arrays[buffers[-1]][...] = self.workload.reference(*(arrays[n] for n in buffers[:-1]))

        return launch

    def release_graphs(self):
        pass

    def time_launches(self, launch, number, flush=True):
        self.flushes += flush
        for _ in range(number):
            launch()
        return 2e-5


@pytest.mark.parametrize("workload", [matmul(32, 48, 16), conv2d(1, 4, 8, 8, 8, 3, 3)], ids=["matmul", "conv"])
def test_the_cuda_runner_passes_arguments_in_the_kernels_order(workload, tmp_path, monkeypatch):
    import json

    from tensorgym.measure import cuda_tasks
    from tensorgym.measure.runner import GPU_TIMING

    space = make_space("tiles", workload, H100)
    config = space.sample(np.random.default_rng(0))
    kernel = space.builder().cuda_kernel(config)
    (tmp_path / "k.cubin").write_bytes(b"\x7fELF")
    for forget, status in ((False, "ok"), (True, "wrong_result")):
        gpu = _SimulatedGpu(workload, forget_output=forget)
        monkeypatch.setattr(cuda_tasks, "session", lambda gpu=gpu: gpu)
        manifest = tmp_path / "k.json"
        manifest.write_text(json.dumps(kernel.manifest(str(tmp_path / "k.cubin"), {})))
        result = cuda_tasks.run_cuda(space.builder(), config, str(manifest), check=True, protocol=GPU_TIMING)
        assert result["status"] == status
        assert manifest.exists()  # the measurer removes it once the kernel has its record (a retry reuses it)
        if status == "ok":
            assert len(result["samples"]) >= GPU_TIMING.min_samples and result["number"] == 1
            assert gpu.flushes >= len(result["samples"])  # the L2 is flushed before every sample
            assert result["device_state"]["sm_clock_mhz"] == 1980.0 and result["timing"] == "full"
            # Far slower than the incumbent: one sample, marked short (on a quiet machine: a busy one times in
            # full, so the test's machine is made quiet whatever else runs on it).
            from tensorgym.measure import protocol as timing_protocol

            monkeypatch.setattr(timing_protocol, "ContentionProbe", lambda: _ScriptedProbe())
            short = cuda_tasks.run_cuda(space.builder(), config, str(manifest), check=True, protocol=GPU_TIMING,
                                        incumbent_s=1e-9)
            assert short["status"] == "ok" and short["timing"] == "short" and len(short["samples"]) == 1


class _ScriptedProbe(ContentionProbe):
    """A contention probe whose successive rounds have the given shares (then none)."""

    def __init__(self, shares=()):
        super().__init__(frozenset({0}))
        self.shares = list(shares)

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(time.perf_counter(), {}, None)

    def share(self, before, after):
        return self.shares.pop(0) if self.shares else 0.0


def test_the_gpu_protocol_times_one_call_per_sample_and_stops_at_200():
    from tensorgym.measure.runner import GPU_TIMING

    rng = np.random.default_rng(0)
    numbers = []

    def noisy(number: int, repeat: int) -> list[float]:  # a 20 us kernel whose samples spread 20 %
        numbers.append(number)
        return list(2e-5 * (1 + 0.2 * rng.random(repeat)))

    timing = GPU_TIMING.run(2e-5, noisy, probe=_ScriptedProbe())
    samples, number = timing.samples, timing.number
    assert number == 1 and set(numbers[1:]) == {1}  # after the warm-up, every sample is one (flushed) call
    assert numbers[0] == 1000  # the warm-up: 20 ms of calls
    assert 10 <= len(samples) <= 200
    # On a busy host, rounds taken again count too: still at most 200 samples, flagged busy.
    busy = GPU_TIMING.run(2e-5, noisy, probe=_ScriptedProbe([0.9] * 1000))
    assert len(busy.samples) + busy.dropped <= 200 and busy.busy
