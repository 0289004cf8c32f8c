"""Where kernels run: the local CPU (the embedded default), or a CPU reached through TVM RPC.

A :class:`Target` describes the hardware that matters for tuning (vector width,
cores, cache sizes) and carries a *fingerprint* that keys measurements in the
database: records taken on another CPU model, ISA, core count or TVM version
never mix with this machine's.

Reading the machine needs no TVM import: the LLVM ``mcpu`` is resolved inside
the build workers, where TVM is loaded anyway.

A *remote* target (:func:`tensorgym.remote_target`) is a CPU on another machine
that a device server (``tensorgym rpc-server``) serves through a TVM RPC
tracker. Its description is read on that machine by the server itself
(:func:`device_description`), so its fingerprint is the one the machine would
have locally: the same device keys the same records, whichever way it is
reached. Where it is reached (:class:`RemoteDevice`) and the LLVM CPU name it
reported are not part of the fingerprint.
"""

from __future__ import annotations

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


class TargetError(TensorgymError, ValueError):
    """The requested target is not available on this machine."""


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
    # Not part of the fingerprint: LLVM's name for the device's CPU when it was read on the device
    # (a remote target; None: ask LLVM on this machine), and where a remote device is reached.
    system_mcpu: str | None = None
    remote: RemoteDevice | None = None

    @property
    def vector_lanes_fp32(self) -> int:
        """fp32 lanes of the widest vector register (AVX-512: 16)."""
        if "avx512f" in self.cpu_flags:
            return 16
        if "avx" in self.cpu_flags or "avx2" in self.cpu_flags:
            return 8
        return 4

    @property
    def vector_registers(self) -> int:
        return 32 if "avx512f" in self.cpu_flags else 16

    @property
    def fingerprint(self) -> str:
        """Stable 16-hex-digit id of (hardware, ISA, cores, TVM version, target kind)."""
        ident = {
            "kind": self.kind, "cpu": self.cpu_model, "flags": sorted(self.cpu_flags),
            "cores": self.num_cores, "tvm": self.tvm_version, "mcpu": self.mcpu, "extra": list(self.extra),
        }
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        where = f" via rpc {self.remote.address}" if self.remote is not None else ""
        return f"{self.kind}:{self.cpu_model} x{self.num_cores}{where}"

    def tvm_target(self):
        """The ``tvm.target.Target``; call only where TVM is imported (workers)."""
        import tvm

        if self.kind != "llvm":
            raise TargetError(f"target kind {self.kind!r} cannot be built here")
        mcpu = self.mcpu or self.system_mcpu or tvm.target.codegen.llvm_get_system_cpu()
        # "num-cores" is required by MetaSchedule and harmless elsewhere.
        config = {"kind": "llvm", "mcpu": mcpu, "num-cores": self.num_cores}
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


@lru_cache(maxsize=None)
def local_cpu() -> Target:
    """The machine this process runs on, as an LLVM target."""
    model, flags = _cpuinfo()
    try:
        tvm_version = metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        tvm_version = "unknown"
    return Target(
        kind="llvm", cpu_model=model, cpu_flags=flags, num_cores=usable_cores(),
        l1d_bytes=_cache_bytes(1, 32 * 1024), l2_bytes=_cache_bytes(2, 1024 * 1024),
        l3_bytes=_cache_bytes(3, 32 * 1024 * 1024), tvm_version=tvm_version,
    )


def device_description() -> dict[str, Any]:
    """This machine as a device server describes it to clients: :func:`local_cpu` plus LLVM's name for
    the CPU (``system_mcpu``) and the ISA family (``machine``). Needs TVM (a device server has it)."""
    import tvm

    data = local_cpu().to_json()
    data["system_mcpu"] = str(tvm.target.codegen.llvm_get_system_cpu())
    data["machine"] = os.uname().machine
    return data


def resolve_target(target: "str | Target | None") -> Target:
    """Accept a Target, ``None``/``"llvm"``/``"cpu"`` (the local CPU) or ``"cuda"``."""
    if isinstance(target, Target):
        return target
    if target is not None and not isinstance(target, str):
        raise TargetError(f"target must be 'llvm' (the local CPU) or a tensorgym.target.Target, got "
                          f"{type(target).__name__} {target!r:.40}")
    if target in (None, "llvm", "cpu", "local"):
        return local_cpu()
    if target == "cuda":
        raise TargetError(
            "target='cuda' needs an NVIDIA GPU and a CUDA-enabled TVM runtime; none is usable from this "
            "process. Use target='llvm' (the local CPU)."
        )
    raise TargetError(f"unknown target {target!r}; use 'llvm' (local CPU) or a tensorgym.target.Target")
