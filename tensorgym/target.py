"""Where kernels run: the local CPU (the embedded default).

A :class:`Target` describes the hardware that matters for tuning (vector width,
cores, cache sizes) and carries a *fingerprint* that keys measurements in the
database: records taken on another CPU model, ISA, core count or TVM version
never mix with this machine's.

Reading the machine needs no TVM import: the LLVM ``mcpu`` is resolved inside
the build workers, where TVM is loaded anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
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
    mcpu: str | None = None  # None: the host CPU, resolved where TVM is loaded
    extra: tuple[tuple[str, Any], ...] = field(default=())

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
        return f"{self.kind}:{self.cpu_model} x{self.num_cores}"

    def tvm_target(self):
        """The ``tvm.target.Target``; call only where TVM is imported (workers)."""
        import tvm

        if self.kind != "llvm":
            raise TargetError(f"target kind {self.kind!r} cannot be built here")
        mcpu = self.mcpu or tvm.target.codegen.llvm_get_system_cpu()
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
        """The target :meth:`to_json` described (its ``fingerprint`` entry is recomputed, not read)."""
        data = {k: v for k, v in data.items() if k != "fingerprint"}
        data["cpu_flags"] = tuple(data.get("cpu_flags", ()))
        data["extra"] = tuple(tuple(item) for item in data.get("extra", ()))
        return Target(**data)


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


def resolve_target(target: "str | Target | None") -> Target:
    """Accept a Target, ``None``/``"llvm"``/``"cpu"`` (the local CPU) or ``"cuda"``."""
    if isinstance(target, Target):
        return target
    if target in (None, "llvm", "cpu", "local"):
        return local_cpu()
    if target == "cuda":
        raise TargetError(
            "target='cuda' needs an NVIDIA GPU and a CUDA-enabled TVM runtime; none is usable from this "
            "process. Use target='llvm' (the local CPU)."
        )
    raise TargetError(f"unknown target {target!r}; use 'llvm' (local CPU) or a tensorgym.target.Target")
