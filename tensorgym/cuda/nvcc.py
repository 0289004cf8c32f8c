"""nvcc: where it is, its version, and compiling CUDA source into cubins and shared libraries.

Outputs are cached by content: the file name is a hash of the source, the flags and the
nvcc version, in :func:`cache_dir` (``$TENSORGYM_CUDA_CACHE``, default
``~/.cache/tensorgym/cuda``). Builder processes compiling the same source at the same time
wait for each other (a lock file per hash) instead of compiling it twice: the CUTLASS
space's split-K variants of one kernel share a binary.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import TensorgymError

CACHE_ENV = "TENSORGYM_CUDA_CACHE"
# The flags TVM's own nvcc path uses for its generated kernels (fp16/bf16 operators enabled).
TVM_FLAGS = (
    "-O3", "--use_fast_math", "--expt-relaxed-constexpr", "--expt-extended-lambda",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
)


class NvccNotFound(TensorgymError, RuntimeError):
    """nvcc is not installed (or not on PATH / under $CUDA_HOME)."""


class CompileError(TensorgymError, RuntimeError):
    """nvcc rejected a kernel; the message holds the end of its output."""


@lru_cache(maxsize=1)
def find_nvcc() -> str:
    """The nvcc executable: ``$CUDA_HOME/bin/nvcc``, ``nvcc`` on PATH, or ``/usr/local/cuda/bin/nvcc``."""
    candidates = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(str(Path(os.environ[env]) / "bin" / "nvcc"))
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise NvccNotFound("nvcc (the CUDA compiler) is not installed: put it on PATH or set CUDA_HOME")


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    """nvcc's version, e.g. ``"13.0.88"``."""
    done = subprocess.run([find_nvcc(), "--version"], capture_output=True, text=True)
    match = re.search(r"V(\d+\.\d+\.\d+)", done.stdout)
    if done.returncode != 0 or not match:
        raise NvccNotFound(f"nvcc --version failed: {(done.stderr or done.stdout).strip()[:300]}")
    return match.group(1)


def cache_dir() -> Path:
    """Where compiled kernels are kept (``$TENSORGYM_CUDA_CACHE`` or ``~/.cache/tensorgym/cuda``)."""
    env = os.environ.get(CACHE_ENV)
    path = Path(env).expanduser() if env else Path.home() / ".cache" / "tensorgym" / "cuda"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Compiled:
    """A compiled kernel file and what ptxas reported for its kernels."""

    path: str
    seconds: float  # nvcc's wall time (0 when the file came from the cache)
    resources: dict  # kernel (mangled) name -> {"registers", "spill_bytes", "shared_bytes", "stack_bytes"}


def compile_cuda(source: str, *, output: str, gencode: tuple[str, ...], flags: tuple[str, ...] = (),
                 include_dirs: tuple[str, ...] = ()) -> Compiled:
    """Compile ``source`` with nvcc into a ``"cubin"`` or a ``"library"`` (shared, C interface).

    ``gencode`` are nvcc ``-gencode`` values (``arch=compute_90,code=sm_90``); a cubin takes
    exactly one. Raises :class:`CompileError` with nvcc's message.
    """
    if output not in ("cubin", "library"):
        raise ValueError(f"output must be 'cubin' or 'library', got {output!r}")
    if output == "cubin" and len(gencode) != 1:
        raise ValueError("a cubin is compiled for exactly one -gencode target")
    nvcc = find_nvcc()
    kind = ["--cubin"] if output == "cubin" else ["--shared", "-Xcompiler", "-fPIC,-fvisibility=hidden"]
    args = [*kind, *(x for g in gencode for x in ("-gencode", g)), *flags,
            *(x for d in include_dirs for x in ("-I", d)), "-Xptxas=-v"]
    key = hashlib.sha256(json.dumps([source, args, nvcc_version()]).encode()).hexdigest()[:24]
    suffix = ".cubin" if output == "cubin" else ".so"
    cache = cache_dir()
    target = cache / f"{key}{suffix}"
    report = cache / f"{key}.ptxas.json"
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder compiles a source; the others wait and reuse it
        if target.exists() and report.exists():
            return Compiled(str(target), 0.0, json.loads(report.read_text()))
        with tempfile.TemporaryDirectory(prefix="tensorgym-nvcc-") as tmp:
            src = Path(tmp) / "kernel.cu"
            src.write_text(source)
            out = Path(tmp) / f"kernel{suffix}"
            t0 = time.perf_counter()
            done = subprocess.run([nvcc, *args, "-o", str(out), str(src)], capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            if done.returncode != 0:
                raise CompileError(f"nvcc failed ({done.returncode}) after {seconds:.1f} s: "
                                   f"{(done.stderr + done.stdout).strip()[-3000:]}")
            resources = parse_ptxas(done.stderr + done.stdout)
            os.replace(out, target)
        report.write_text(json.dumps(resources))
    return Compiled(str(target), seconds, resources)


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """ptxas ``-v`` output -> {kernel: {"registers", "spill_bytes", "shared_bytes", "stack_bytes"}}."""
    info: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        match = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)",
                                                                                 line)
        if match:
            current = info.setdefault(match.group(1), {})
        if current is None:
            continue
        if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            current.update(stack_bytes=int(m[1]), spill_bytes=int(m[2]) + int(m[3]))
        if m := re.search(r"Used (\d+) registers", line):
            current["registers"] = int(m[1])
        if m := re.search(r"(\d+) bytes smem", line):
            current["shared_bytes"] = int(m[1])
    return info
