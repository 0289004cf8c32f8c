"""Functions that run inside worker processes (see :mod:`.worker`).

``build`` runs in the builder pool: schedule, compile, link a shared library.
:func:`check_and_time` is the device side every :class:`~.runner.Runner`
shares: fill the kernel's arguments, make the first (checked) call, compare
with the NumPy reference when asked, and time the kernel with the
:class:`TimingProtocol`. ``run_local`` is the local runner's entry point.
They only return plain data; failures are raised and become records upstream.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import Config
from ..spaces.base import Space
from ..target import Target
from ..workloads import Workload
from .protocol import TimingProtocol

# Test hook: what the runner does to a config's kernel instead of running it normally.
FAULTS = ("crash", "hang")


@lru_cache(maxsize=4)
def _tvm_target(target):
    return target.tvm_target()


def build(space: Space, config: Config, out_dir: str) -> dict[str, Any]:
    """Apply ``config``, compile it, and link it as ``out_dir/<uuid>.so``."""
    t0 = time.perf_counter()
    path = compile_library(space.apply(config), space.target, out_dir)
    return {"path": path, "seconds": time.perf_counter() - t0}


def compile_library(mod, target: Target, out_dir: str) -> str:
    """Compile the IRModule ``mod`` for ``target`` into ``out_dir/<uuid>.so``; returns the path."""
    import tvm

    executable = tvm.compile(mod, target=_tvm_target(target))
    path = Path(out_dir) / f"{uuid.uuid4().hex}.so"
    executable.export_library(str(path), fcompile=link_shared)
    return str(path)


@lru_cache(maxsize=1)
def _ld() -> str | None:
    return shutil.which("ld")


def link_shared(output: str, objects: list[str], options: list[str] | None = None, **kwargs: Any) -> None:
    """Link a kernel's object files into ``output`` with ``ld -shared``.

    TVM's default (``tvm.contrib.cc.create_shared``) runs the C++ compiler
    driver, which spends ~45 ms of a ~0.2 s build starting gcc and collect2.
    The objects of an LLVM CPU kernel need no start files or libraries (their
    symbols resolve against the TVM runtime already loaded in the runner), so
    the linker alone does the job. Anything else (sources, options, no ``ld``)
    goes to TVM's default.
    """
    ld = _ld()
    if ld is None or options or not all(str(o).endswith(".o") for o in objects):
        from tvm.support import cc  # TVM 0.27 moved it from tvm.contrib

        cc.create_shared(output, objects, options, **kwargs)
        return
    done = subprocess.run([ld, "-shared", "-o", output, *map(str, objects)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ld -shared failed ({done.returncode}): {done.stderr.strip()[:2000]}")


@lru_cache(maxsize=4)
def reference_data(workload: Workload) -> tuple[list[np.ndarray], np.ndarray]:
    """Fixed random inputs of a workload and their NumPy reference output."""
    inputs = workload.random_inputs(seed=0)
    return inputs, workload.reference(*inputs)


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    if out.shape != ref.shape:
        return float("inf")
    if not np.all(np.isfinite(out)):
        return float("inf")
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(out.astype(np.float64) - ref))) / scale


def run_local(space: Space, config: Config, path: str, *, check: bool, protocol: TimingProtocol,
              fault: str | None = None) -> dict[str, Any]:
    """The local runner: load the library at ``path`` on this machine's CPU, then :func:`check_and_time`."""
    import tvm

    try:
        module = tvm.runtime.load_module(path)
    finally:
        Path(path).unlink(missing_ok=True)
    return check_and_time(module, tvm.cpu(0), space, config, check=check, protocol=protocol, fault=fault)


def check_and_time(module, device, space: Space, config: Config, *, check: bool, protocol: TimingProtocol,
                   fault: str | None = None) -> dict[str, Any]:
    """Run a loaded kernel on a TVM ``device``: first call, NumPy check (if ``check``), then the protocol.

    Shared by every runner, so every kernel is checked and timed the same way
    wherever it runs. Returns ``{"status": "ok", "samples": [...], "number": n}``
    or ``{"status": "wrong_result", "error": ...}``.
    """
    import tvm

    inputs, reference = reference_data(space.workload)
    arrays = space.kernel_arguments(config, inputs)
    if check:
        arrays[-1] = np.full_like(arrays[-1], np.nan)  # outputs the kernel forgets to write then fail
    args = [tvm.runtime.tensor(a, device) for a in arrays]

    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "hang":
        while True:
            time.sleep(3600)

    first_call_s = protocol.first_call(lambda: module["main"](*args))  # warm-up, and the checked call
    if check:
        out = space.canonical_output(config, [a.numpy() for a in args])
        err = relative_error(out, reference)
        if not err <= protocol.rtol:
            return {"status": "wrong_result", "error": f"max relative error {err:.3g} > {protocol.rtol:g}"}

    samples, number = protocol.run(first_call_s, main_sampler(module, device, args))
    return {"status": "ok", "samples": samples, "number": number}


def main_sampler(module, device, args: list) -> Callable[[int, int], list[float]]:
    """``time_samples(number, repeat)`` for :meth:`TimingProtocol.run` over ``module["main"](*args)``."""

    def time_samples(number: int, repeat: int) -> list[float]:
        result = module.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=0)(*args)
        return [float(s) for s in result.results]

    return time_samples
