"""Where kernels run: the local CPU (the embedded default), a CPU reached through TVM RPC, or an NVIDIA GPU.

A :class:`Target` describes the hardware that matters for tuning (vector width,
cores, cache sizes; for a GPU its :class:`CudaDevice`: SMs, per-block limits,
clocks, driver) and carries a *fingerprint* that keys measurements in the
database: records taken on another CPU model, ISA, core count, GPU, driver or
TVM version never mix with this machine's.

Reading the machine needs no TVM import: the LLVM ``mcpu`` is resolved inside
the build workers, where TVM is loaded anyway. ``target="cuda"`` reads the
local GPU through the CUDA driver (``cuda-bindings``) and NVML; without a
usable GPU it raises one :class:`TargetError` that lists what is missing.
:func:`cuda_target` describes a known GPU (an H100, say) without one, for
tests and code generation.

A *remote* target (:func:`tensorgym.remote_target`) is a CPU on another machine
that a device server (``tensorgym rpc-server``) serves through a TVM RPC
tracker. Its description is read on that machine by the server itself
(:func:`device_description`), so its fingerprint is the one the machine would
have locally: the same device keys the same records, whichever way it is
reached. Where it is reached (:class:`RemoteDevice`) and the LLVM CPU name it
reported are not part of the fingerprint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import TensorgymError

# ISA flags that change what code LLVM emits or how fast it runs.
_RELEVANT_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl",
    "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "neon", "asimd", "sve",
)
# /proc/cpuinfo flag -> LLVM feature, for the ISA extensions kernels may use. A virtual machine
# can report a CPU model whose LLVM name lacks some of them (an AMX-capable Xeon that LLVM calls
# "rocketlake"); the target then enables them explicitly (``mattr``).
_LLVM_FEATURES = {
    "avx512_vnni": "avx512vnni", "avx_vnni": "avxvnni", "avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16",
    "amx_tile": "amx-tile", "amx_int8": "amx-int8", "amx_bf16": "amx-bf16",
}


CUDA_DEVICE_ENV = "TENSORGYM_CUDA_DEVICE"
# A CPU profile name (``x86-64-v3``, ``znver3``, ...): the local CPU restricted to that profile's ISA.
CPU_ENV = "TENSORGYM_CPU"

_SSE = ("sse4_2",)
_X86_64_V3 = _SSE + ("avx", "avx2", "fma")
_X86_64_V4 = _X86_64_V3 + ("avx512f", "avx512bw", "avx512dq", "avx512vl")


@dataclass(frozen=True)
class CpuProfile:
    """A CPU as LLVM and tuning see it, for targets of CPUs that need not be here.

    ``flags`` are /proc/cpuinfo names (what :attr:`Target.cpu_flags` holds). ``mcpu`` is LLVM's CPU
    name, ``mtriple`` the architecture (empty: x86-64, the host's). Cache sizes are per core (L1d,
    L2) and per socket (L3), from the vendors' data sheets; they steer pruning rules, not code.
    """

    name: str
    mcpu: str
    flags: tuple[str, ...]
    l1d_bytes: int = 32 << 10
    l2_bytes: int = 1 << 20
    l3_bytes: int = 32 << 20
    mtriple: str = ""
    description: str = ""


# The generic ISA levels a host can be restricted to, and the CPUs of the compile-only matrix.
CPU_PROFILES: dict[str, CpuProfile] = {p.name: p for p in (
    CpuProfile("x86-64-v3", "x86-64-v3", _X86_64_V3, description="any x86-64 CPU with AVX2 and FMA"),
    CpuProfile("x86-64-v4", "x86-64-v4", _X86_64_V4, description="AVX-512 F/BW/DQ/VL"),
    CpuProfile("haswell", "haswell", _X86_64_V3, 32 << 10, 256 << 10, 8 << 20, description="Intel Haswell (AVX2)"),
    CpuProfile("znver3", "znver3", _X86_64_V3, 32 << 10, 512 << 10, 32 << 20, description="AMD Zen 3 (AVX2)"),
    CpuProfile("skylake-avx512", "skylake-avx512", _X86_64_V4, 32 << 10, 1 << 20, 32 << 20,
               description="Intel Skylake-X (AVX-512)"),
    CpuProfile("cascadelake", "cascadelake", _X86_64_V4 + ("avx512_vnni",), 32 << 10, 1 << 20, 32 << 20,
               description="Intel Cascade Lake (AVX-512 + VNNI)"),
    CpuProfile("znver4", "znver4", _X86_64_V4 + ("avx512_vnni", "avx512_bf16"), 32 << 10, 1 << 20, 32 << 20,
               description="AMD Zen 4 (AVX-512 + VNNI + BF16)"),
    CpuProfile("sapphirerapids", "sapphirerapids",
               _X86_64_V4 + ("avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8",
                             "amx_bf16"), 48 << 10, 2 << 20, 105 << 20,
               description="Intel Sapphire Rapids (AVX-512 + VNNI + BF16 + AMX)"),
    CpuProfile("neoverse-n1", "neoverse-n1", ("neon", "asimd"), 64 << 10, 1 << 20, 32 << 20,
               mtriple="aarch64-linux-gnu", description="Arm Neoverse N1 (aarch64, NEON); compile-only"),
)}
# Profiles a local x86-64 CPU can act as (the others are other architectures, compile-only).
RUNNABLE_PROFILES = tuple(name for name, profile in CPU_PROFILES.items() if not profile.mtriple)
# What the vendor libraries are told when the local CPU is restricted to a profile without AVX-512
# (``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``, OpenBLAS's kernel family), so that vendors
# and kernels run the same instructions.
_VENDOR_ISA_ENV = {
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "DNNL_MAX_CPU_ISA": "AVX512_CORE",
               "MKL_ENABLE_INSTRUCTIONS": "AVX512", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX512",
               "OPENBLAS_CORETYPE": "SkylakeX"},
}

# The widest oneDNN ISA level a flag allows, widest first.
_ONEDNN_AVX512_LEVELS = (("amx_int8", "AVX512_CORE_AMX"), ("avx512_bf16", "AVX512_CORE_BF16"),
                         ("avx512_vnni", "AVX512_CORE_VNNI"))


class TargetError(TensorgymError, ValueError):
    """The requested target is not available on this machine."""


@dataclass(frozen=True)
class CudaDevice:
    """An NVIDIA GPU as tuning sees it: its limits, its clocks, and the software that drives it.

    Byte counts are bytes, clocks MHz. ``driver`` and ``toolkit`` (the CUDA driver and nvcc
    versions) are empty in a description made without the GPU (:func:`cuda_target`).
    """

    name: str  # e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int]  # (9, 0) for Hopper
    num_sms: int
    l2_bytes: int
    memory_bytes: int
    max_sm_clock_mhz: int
    max_memory_clock_mhz: int
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_shared_memory_per_block: int = 48 * 1024  # without opting in (static __shared__ arrays)
    max_shared_memory_per_block_optin: int = 48 * 1024  # dynamic shared memory, after cuFuncSetAttribute
    shared_memory_per_sm: int = 64 * 1024
    registers_per_block: int = 65536
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    warp_size: int = 32
    driver: str = ""
    toolkit: str = ""

    @property
    def arch(self) -> str:
        """The ``sm_XY`` name nvcc and TVM take (``sm_90`` for an H100)."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


# Descriptions of GPUs from their data sheets and CUDA's device properties, for work without one.
KNOWN_GPUS: dict[str, CudaDevice] = {
    "h100": CudaDevice(
        name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), num_sms=132, l2_bytes=50 * 1024 * 1024,
        memory_bytes=80 * 1024**3, max_sm_clock_mhz=1980, max_memory_clock_mhz=2619,
        max_shared_memory_per_block_optin=227 * 1024, shared_memory_per_sm=228 * 1024),
    "a100": CudaDevice(
        name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), num_sms=108, l2_bytes=40 * 1024 * 1024,
        memory_bytes=80 * 1024**3, max_sm_clock_mhz=1410, max_memory_clock_mhz=1593,
        max_shared_memory_per_block_optin=163 * 1024, shared_memory_per_sm=164 * 1024),
}


@dataclass(frozen=True)
class RemoteDevice:
    """A device served by ``tensorgym rpc-server`` behind a TVM RPC tracker.

    ``key`` is the device key the server registered with; ``request_timeout`` is
    how many seconds a measurement waits for the tracker to hand out a free
    server of that key (servers measure one kernel at a time).
    """

    tracker_host: str
    tracker_port: int
    key: str
    request_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not self.tracker_host or not self.key or "/" in self.key:
            raise TargetError(f"an RPC device needs a tracker host and a key without '/', got {self.address!r}")
        if not 0 < self.tracker_port < 65536:
            raise TargetError(f"tracker port must be in 1..65535, got {self.tracker_port}")
        if not self.request_timeout > 0:
            raise TargetError(f"request_timeout must be positive seconds, got {self.request_timeout!r}")

    @property
    def address(self) -> str:
        """``HOST:PORT/KEY``, the command line's ``--rpc`` form."""
        return f"{self.tracker_host}:{self.tracker_port}/{self.key}"

    @staticmethod
    def parse(text: str, request_timeout: float = 60.0) -> "RemoteDevice":
        """``HOST:PORT/KEY`` (e.g. ``127.0.0.1:9190/zen5``) as a RemoteDevice."""
        tracker, slash, key = str(text).partition("/")
        host, colon, port = tracker.rpartition(":")
        if not slash or not colon or not port.isdigit():
            raise TargetError(f"expected TRACKER_HOST:PORT/KEY (e.g. 127.0.0.1:9190/zen5), got {text!r}")
        return RemoteDevice(host, int(port), key, request_timeout)


@dataclass(frozen=True)
class Target:
    """A device kernels are built for and timed on."""

    kind: str  # "llvm" (CPU) or "cuda"
    cpu_model: str
    cpu_flags: tuple[str, ...]
    num_cores: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    tvm_version: str
    mcpu: str | None = None  # None: the device's own CPU, as LLVM names it
    extra: tuple[tuple[str, Any], ...] = field(default=())
    device: CudaDevice | None = None  # the GPU of a "cuda" target (the CPU fields then describe its host)
    # Not part of the fingerprint: LLVM's name for the device's CPU when it was read on the device
    # (a remote target; None: ask LLVM on this machine), and where a remote device is reached.
    system_mcpu: str | None = None
    remote: RemoteDevice | None = None
    # The architecture LLVM emits for when it is not the host's (an aarch64 target built on x86-64,
    # compile-only); empty: the host's.
    mtriple: str = ""
    # The CPU profile this target was restricted to (``x86-64-v3``), or the profile a constructed
    # target describes; empty for the machine as it is. Part of the fingerprint through ``extra``.
    profile: str = ""

    @property
    def vector_lanes_fp32(self) -> int:
        """fp32 lanes of the widest vector register (AVX-512: 16; AVX2: 8; NEON, SSE: 4)."""
        if "avx512f" in self.cpu_flags:
            return 16
        if "avx" in self.cpu_flags or "avx2" in self.cpu_flags:
            return 8
        return 4

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers (AVX-512 and aarch64: 32; AVX2: 16)."""
        return 32 if "avx512f" in self.cpu_flags or self.is_aarch64 else 16

    @property
    def is_aarch64(self) -> bool:
        return self.mtriple.startswith("aarch64") or ("asimd" in self.cpu_flags and "avx" not in self.cpu_flags)

    @property
    def isa_level(self) -> str:
        """The widest x86 vector ISA the target may use: ``"avx512"``, ``"avx2"``, ``"sse"`` (or ``"neon"``)."""
        if self.is_aarch64:
            return "neon"
        if "avx512f" in self.cpu_flags:
            return "avx512"
        return "avx2" if "avx2" in self.cpu_flags and "fma" in self.cpu_flags else "sse"

    def missing_flags(self, *flags: str) -> list[str]:
        """The ISA flags of ``flags`` this target lacks (``[]``: it has them all)."""
        return [f for f in flags if f not in self.cpu_flags]

    def vendor_environment(self) -> dict[str, str]:
        """Variables that restrict vendor libraries to this target's ISA (empty for the machine as it is)."""
        if not self.profile or self.kind != "llvm":
            return {}
        env = dict(_VENDOR_ISA_ENV.get(self.isa_level, {}))
        if self.isa_level == "avx512":
            # oneDNN's levels above AVX512_CORE add VNNI, BF16 and AMX: a profile that has them keeps them.
            cap = next((level for flag, level in _ONEDNN_AVX512_LEVELS if flag in self.cpu_flags), "AVX512_CORE")
            env["ONEDNN_MAX_CPU_ISA"] = env["DNNL_MAX_CPU_ISA"] = cap
        return env

    @property
    def fingerprint(self) -> str:
        """Stable 16-hex-digit id of (hardware, ISA, cores, TVM version, target kind).

        A CUDA target is identified by its GPU (name, SMs, limits, clocks, driver, toolkit) and
        the TVM version: its host CPU does not time kernels.
        """
        if self.device is not None:
            ident = {"kind": self.kind, "device": asdict(self.device), "tvm": self.tvm_version,
                     "extra": list(self.extra)}
        else:
            ident = {
                "kind": self.kind, "cpu": self.cpu_model, "flags": sorted(self.cpu_flags),
                "cores": self.num_cores, "tvm": self.tvm_version, "mcpu": self.mcpu, "extra": list(self.extra),
            }
            # Added keys enter the identity only when set, so that earlier fingerprints stay valid.
            if self.mtriple:
                ident["mtriple"] = self.mtriple
            if self.profile:
                ident["profile"] = self.profile
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        if self.device is not None:
            return f"{self.kind}:{self.device.name} ({self.device.arch}, {self.device.num_sms} SMs)"
        where = f" via rpc {self.remote.address}" if self.remote is not None else ""
        restricted = f" as {self.profile}" if self.profile and self.profile not in self.cpu_model else ""
        return f"{self.kind}:{self.cpu_model}{restricted} x{self.num_cores}{where}"

    def tvm_target(self):
        """The ``tvm.target.Target``; call only where TVM is imported (workers)."""
        import tvm

        if self.kind == "cuda" and self.device is not None:
            gpu = self.device
            # The shared-memory limit is the opt-in one: kernels above 48 KiB use dynamic shared memory.
            return tvm.target.Target({
                "kind": "cuda", "arch": gpu.arch, "max_threads_per_block": gpu.max_threads_per_block,
                "max_num_threads": gpu.max_threads_per_block, "thread_warp_size": gpu.warp_size,
                "max_shared_memory_per_block": gpu.max_shared_memory_per_block_optin,
                "registers_per_block": gpu.registers_per_block, "l2_cache_size_bytes": gpu.l2_bytes,
            }, host={"kind": "llvm"})
        if self.kind != "llvm":
            raise TargetError(f"target kind {self.kind!r} cannot be built here")
        mcpu = self.mcpu or self.system_mcpu or tvm.target.codegen.llvm_get_system_cpu()
        # "num-cores" is required by MetaSchedule and harmless elsewhere.
        config = {"kind": "llvm", "mcpu": mcpu, "num-cores": self.num_cores}
        if self.mtriple:
            config["mtriple"] = self.mtriple
            return tvm.target.Target(config)
        mattr = self.llvm_missing_features(mcpu)
        if mattr:
            config["mattr"] = mattr
        return tvm.target.Target(config)

    def llvm_missing_features(self, mcpu: str) -> list[str]:
        """``+feature`` for each ISA extension this CPU has that LLVM's ``mcpu`` model lacks (needs TVM)."""
        import tvm

        known = tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": mcpu}))
        wanted = [_LLVM_FEATURES[f] for f in self.cpu_flags if f in _LLVM_FEATURES]
        return [f"+{feature}" for feature in wanted if feature not in known]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fingerprint"] = self.fingerprint
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Target":
        """The target :meth:`to_json` (or :func:`device_description`) wrote; unknown keys are ignored."""
        known = {f.name for f in fields(Target)}
        values = {k: v for k, v in data.items() if k in known}
        values["cpu_flags"] = tuple(values.get("cpu_flags", ()))
        values["extra"] = tuple(tuple(item) for item in values.get("extra", ()))
        if isinstance(values.get("remote"), dict):
            values["remote"] = RemoteDevice(**values["remote"])
        if isinstance(values.get("device"), dict):
            gpu = dict(values["device"])
            gpu["compute_capability"] = tuple(gpu.get("compute_capability", ()))
            values["device"] = CudaDevice(**gpu)
        return Target(**values)


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    family = re.search(r"^cpu family\s*:\s*(\d+)$", text, re.M)
    model_no = re.search(r"^model\s*:\s*(\d+)$", text, re.M)
    flags_m = re.search(r"^(flags|Features)\s*:\s*(.+)$", text, re.M)
    name = model.group(1).strip() if model else os.uname().machine
    if family and model_no:
        # Virtual machines often hide the model name ("AMD EPYC"); family/model tell generations apart.
        name = f"{name} (family {family.group(1)} model {model_no.group(1)})"
    flags = set(flags_m.group(2).split()) if flags_m else set()
    return name, tuple(f for f in _RELEVANT_FLAGS if f in flags)


def _cache_bytes(level: int, default: int) -> int:
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            lvl = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if lvl == level and kind in ("Data", "Unified"):
            units = {"K": 1024, "M": 1024 * 1024, "G": 1024**3}
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return default


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _tvm_version() -> str:
    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        return "unknown"


@lru_cache(maxsize=None)
def native_cpu() -> Target:
    """The machine this process runs on, as an LLVM target, with every ISA extension it has."""
    model, flags = _cpuinfo()
    return Target(
        kind="llvm", cpu_model=model, cpu_flags=flags, num_cores=usable_cores(),
        l1d_bytes=_cache_bytes(1, 32 * 1024), l2_bytes=_cache_bytes(2, 1024 * 1024),
        l3_bytes=_cache_bytes(3, 32 * 1024 * 1024), tvm_version=_tvm_version(),
    )


def cpu_profile(name: str) -> CpuProfile:
    """The :data:`CPU_PROFILES` entry called ``name``; one clear error listing the known ones otherwise."""
    profile = CPU_PROFILES.get(str(name).strip().lower())
    if profile is None:
        raise TargetError(f"unknown CPU profile {name!r}; known: {', '.join(CPU_PROFILES)} (or 'native')")
    return profile


def restricted_cpu(base: Target, profile: "str | CpuProfile") -> Target:
    """``base`` (a local CPU) acting as a smaller one: kernels compiled for ``profile``'s ISA, run on ``base``.

    The flags are those of ``base`` that the profile has; LLVM gets the profile's CPU name (for
    ``x86-64-v3``: AVX2 + FMA, no AVX-512, generic tuning). The fingerprint names the profile, so
    records, catalogues and peaks of the restricted and the native target never mix. A profile with
    an ISA ``base`` lacks is refused: kernels built for it would not run here.
    """
    profile = profile if isinstance(profile, CpuProfile) else cpu_profile(profile)
    if profile.mtriple:
        raise TargetError(f"{profile.name} is another architecture ({profile.mtriple}): it can be compiled for "
                          f"(tensorgym.target.constructed_cpu), not run here")
    lacking = [f for f in profile.flags if f not in base.cpu_flags]
    if lacking:
        raise TargetError(f"this CPU ({base.cpu_model}) cannot act as {profile.name}: it lacks {', '.join(lacking)}")
    flags = tuple(f for f in base.cpu_flags if f in profile.flags)
    return dataclasses.replace(base, cpu_flags=flags, mcpu=profile.mcpu, profile=profile.name)


def constructed_cpu(profile: "str | CpuProfile", num_cores: int = 2) -> Target:
    """A target for a CPU that need not be here (code generation, pruning, masks; not timing)."""
    profile = profile if isinstance(profile, CpuProfile) else cpu_profile(profile)
    return Target(kind="llvm", cpu_model=f"{profile.name} (constructed)", cpu_flags=profile.flags,
                  num_cores=num_cores, l1d_bytes=profile.l1d_bytes, l2_bytes=profile.l2_bytes,
                  l3_bytes=profile.l3_bytes, tvm_version=_tvm_version(), mcpu=profile.mcpu,
                  mtriple=profile.mtriple, profile=profile.name)


@lru_cache(maxsize=None)
def local_cpu() -> Target:
    """The CPU kernels run on here: the machine as it is, or restricted to ``$TENSORGYM_CPU``'s profile.

    ``TENSORGYM_CPU=x86-64-v3`` makes an AVX-512 host act as an AVX2 CPU (kernels compiled for
    AVX2 + FMA, vendor libraries restricted the same way); unset, empty or ``native``: the machine.
    """
    wanted = os.environ.get(CPU_ENV, "").strip()
    if wanted in ("", "native"):
        return native_cpu()
    return restricted_cpu(native_cpu(), wanted)


def cuda_target(gpu: "str | CudaDevice" = "h100") -> Target:
    """A CUDA target for a GPU that need not be here: a :data:`KNOWN_GPUS` name or a :class:`CudaDevice`.

    Its kernels can be generated and compiled on any machine with nvcc (tests, ahead-of-time
    builds); timing them needs the GPU itself, i.e. ``target="cuda"`` (:func:`local_cuda`).
    """
    if isinstance(gpu, str):
        if gpu.lower() not in KNOWN_GPUS:
            raise TargetError(f"unknown GPU {gpu!r}; known: {', '.join(KNOWN_GPUS)} (or pass a CudaDevice)")
        gpu = KNOWN_GPUS[gpu.lower()]
    if not isinstance(gpu, CudaDevice):
        raise TargetError(f"expected a GPU name or a CudaDevice, got {type(gpu).__name__}")
    return dataclasses.replace(local_cpu(), kind="cuda", device=gpu)


@lru_cache(maxsize=None)
def local_cuda(ordinal: int = 0) -> Target:
    """GPU ``ordinal`` of this machine, read through the CUDA driver and NVML, as a CUDA target.

    Raises :class:`TargetError` naming everything that is missing: the ``cuda-bindings``
    package (``pip install 'tensorgym[cuda]'``), the NVIDIA driver, a visible GPU, nvcc.
    """
    from .cuda.driver import GpuUnavailable, describe_gpu
    from .cuda.nvcc import NvccNotFound, nvcc_version

    missing = []
    try:
        properties = describe_gpu(ordinal)
    except GpuUnavailable as exc:
        missing.append(str(exc))
        properties = None
    try:
        toolkit = nvcc_version()
    except NvccNotFound as exc:
        missing.append(str(exc))
        toolkit = ""
    if missing:
        raise TargetError("target='cuda' is not usable here: " + "; ".join(missing)
                          + ". (tensorgym.target.cuda_target('h100') describes a GPU for code generation alone.)")
    return dataclasses.replace(local_cpu(), kind="cuda", device=CudaDevice(**properties, toolkit=toolkit))


def cuda_ordinal() -> int:
    """The GPU ``target="cuda"`` means, and the one kernels are timed on: ``$TENSORGYM_CUDA_DEVICE`` (default 0)."""
    return int(os.environ.get(CUDA_DEVICE_ENV, "0"))


def device_description() -> dict[str, Any]:
    """This machine as a device server describes it to clients: :func:`local_cpu` plus LLVM's name for
    the CPU (``system_mcpu``) and the ISA family (``machine``). Needs TVM (a device server has it)."""
    import tvm

    data = local_cpu().to_json()
    data["system_mcpu"] = str(tvm.target.codegen.llvm_get_system_cpu())
    data["machine"] = os.uname().machine
    return data


def resolve_target(target: "str | Target | None") -> Target:
    """Accept a Target, ``None``/``"llvm"``/``"cpu"`` (the local CPU, after ``$TENSORGYM_CPU``), ``"native"``
    (the machine as it is), a CPU profile name (this CPU restricted to it) or ``"cuda"`` (this machine's GPU)."""
    if isinstance(target, Target):
        return target
    if target is not None and not isinstance(target, str):
        raise TargetError(f"target must be 'llvm' (the local CPU), 'cuda' (the local GPU) or a "
                          f"tensorgym.target.Target, got {type(target).__name__} {target!r:.40}")
    if target in (None, "llvm", "cpu", "local"):
        return local_cpu()
    if target == "native":
        return native_cpu()
    if target == "cuda":
        return local_cuda(cuda_ordinal())
    if target.strip().lower() in CPU_PROFILES:
        return restricted_cpu(native_cpu(), target)
    raise TargetError(f"unknown target {target!r}; use 'llvm' (the local CPU), 'native', 'cuda' (the local GPU), "
                      f"a CPU profile to restrict this CPU to ({', '.join(RUNNABLE_PROFILES)}) or a "
                      f"tensorgym.target.Target")
