"""Functions that run inside worker processes (see :mod:`.worker`).

``build`` runs in the builder pool: schedule (the space's
:class:`~tensorgym.spaces.builder.KernelBuilder`), compile, link a shared library.
:func:`check_and_time` is the device side every :class:`~.runner.Runner`
shares: fill the kernel's arguments, make the first (checked) call, compare
with the NumPy reference when asked, and time the kernel with the
:class:`TimingProtocol`. ``run_local`` is the local runner's entry point.
They only return plain data; failures are raised and become records upstream.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import Config
from ..spaces.builder import KernelBuilder
from ..target import Target
from ..workloads import Workload
from .contention import ContentionProbe
from .faults import InfrastructureFault, infrastructure_cause, low_disk
from .paired import PairedReference, PairedSampler
from .protocol import TimingProtocol
from .worker import mark

# Test hooks: what happens to a config's kernel instead of its normal measurement. In the runner:
# "crash" (the kernel segfaults), "hang" (it never returns), "kill" (the runner is killed from outside
# while the kernel runs, as the OOM killer would); in the builder: "nospace" (the disk fills up).
# A fault "X-once" is X on the first attempt only (see Measurer).
RUN_FAULTS = ("crash", "hang", "kill")
BUILD_FAULTS = ("nospace",)
FAULTS = RUN_FAULTS + BUILD_FAULTS


@lru_cache(maxsize=4)
def _tvm_target(target):
    return target.tvm_target()


def build(builder: KernelBuilder, config: Config, out_dir: str, fault: str | None = None) -> dict[str, Any]:
    """Apply ``config`` with ``builder``, compile it, and link it as ``out_dir/<uuid>.so``.

    A failure while the output or temporary directory is (almost) full is raised as an
    :class:`~.faults.InfrastructureFault`: the compiler's error is then not the schedule's fault.
    """
    t0 = time.perf_counter()
    try:
        if fault == "nospace":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), out_dir)
        path = compile_library(builder.apply(config), builder.target, out_dir)
    except Exception as exc:
        cause = infrastructure_cause(exc) or low_disk(out_dir, tempfile.gettempdir())
        if cause:
            raise InfrastructureFault(f"{cause}: {type(exc).__name__}: {str(exc)[:1500]}") from exc
        raise
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
def enter_kernel(fault: str | None = None) -> None:
    """Mark that the kernel is about to run (a fault signal from here on is the kernel's, see .faults),
    then act out an injected runtime ``fault``."""
    mark("kernel")
    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "hang":
        while True:
            time.sleep(3600)


def reference_data(workload: Workload) -> tuple[list[np.ndarray], np.ndarray]:
    """Fixed random inputs of a workload and their NumPy reference output (read-only arrays).

    Made once per workload and process: drawing the inputs and computing the
    reference cost tens of milliseconds per trial on a large layer.
    """
    inputs, reference = _cached_reference_data(workload)
    return list(inputs), reference


@lru_cache(maxsize=4)
def _cached_reference_data(workload: Workload) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    from threadpoolctl import threadpool_limits

    # The BLAS library runs single-threaded here: its worker threads spin for a while after a call, and
    # a kernel timed right after would share its cores with them (its first call then runs several
    # times too slow, on a machine that looks busy).
    with threadpool_limits(limits=1):
        inputs = tuple(workload.random_inputs(seed=0))
        reference = workload.reference(*inputs)
    for array in (*inputs, reference):
        array.flags.writeable = False  # shared by every kernel of the workload: nothing may change it
    return inputs, reference


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    if out.shape != ref.shape:
        return float("inf")
    if not np.all(np.isfinite(out)):
        return float("inf")
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(out.astype(np.float64) - ref))) / scale


def poisoned_like(array: np.ndarray) -> np.ndarray:
    """An array of ``array``'s shape and type that no correct output equals: NaN, or the integer minimum."""
    if np.issubdtype(array.dtype, np.integer):
        return np.full_like(array, np.iinfo(array.dtype).min)
    return np.full_like(array, np.nan)


def run_local(builder: KernelBuilder, config: Config, path: str, *, check: bool, protocol: TimingProtocol,
              fault: str | None = None, incumbent_s: float | None = None,
              paired: PairedReference | None = None) -> dict[str, Any]:
    """The local runner: load the library at ``path`` on this machine's CPU, then :func:`check_and_time`.

    The library is left in place (the measurer removes it once the kernel has its record, so that a
    measurement the machine interrupted can be repeated).
    """
    import tvm

    module = tvm.runtime.load_module(path)
    return check_and_time(module, tvm.cpu(0), builder, config, check=check, protocol=protocol, fault=fault,
                          incumbent_s=incumbent_s, paired=paired)


def check_and_time(module, device, builder: KernelBuilder, config: Config, *, check: bool, protocol: TimingProtocol,
                   fault: str | None = None, incumbent_s: float | None = None,
                   fresh_process: bool = False, paired: PairedReference | None = None) -> dict[str, Any]:
    """Run a loaded kernel on a TVM ``device``: first call, NumPy check (if ``check``), then the protocol.

    Shared by every runner, so every kernel is checked and timed the same way
    wherever it runs. ``builder`` (the space's :class:`~tensorgym.spaces.builder.KernelBuilder`)
    prepares the process and gives the kernel's arguments and its output in the workload's
    layout. ``incumbent_s``, the fastest latency known for the workload, lets the protocol
    time a much slower kernel short. ``fresh_process``: the device
    runs the kernel in a process that has timed nothing yet (an RPC session), so it
    gets the process warm-up whatever this process timed before. Returns
    ``{"status": "ok", "samples": [...], "number": n, "contention": share, "dropped": n,
    "timing": "full" | "short"}`` or ``{"status": "wrong_result", "error": ...}``. With ``paired`` (a
    reference kernel, :mod:`.paired`), every sample is taken between two of the reference kernel's, on this
    machine, and the result's ``device_state`` says how the reference ran.
    """
    import tvm

    builder.prepare_runtime()
    inputs, reference = reference_data(builder.workload)
    arrays = builder.kernel_arguments(config, inputs)
    if check:
        arrays[-1] = poisoned_like(arrays[-1])  # outputs the kernel forgets to write then fail
    args = [tvm.runtime.tensor(a, device) for a in arrays]

    probe = ContentionProbe()
    enter_kernel(fault)

    # warm-up, and the checked call; its contention share decides whether an early stop may trust it. On an RPC
    # device (fresh_process) the call is timed here, round trip included, and the share is this machine's load:
    # no share, so no early stop, and a slow kernel gets the protocol's confirming sample timed on the device.
    before = probe.snapshot()
    first_call_s = protocol.first_call(lambda: module["main"](*args), force=fresh_process)
    first_share = None if fresh_process else probe.share(before, probe.snapshot())
    if check:
        # Only the output comes back from the device: the inputs the builder gets are the ones it gave.
        out = builder.canonical_output(config, [*arrays[:-1], args[-1].numpy()])
        err = relative_error(out, reference)
        tolerance = builder.workload.tolerance(protocol.rtol)
        if not err <= tolerance:
            return {"status": "wrong_result", "error": f"max relative error {err:.3g} > {tolerance:g}"}

    # One-call samples are timed here rather than by time_evaluator (see main_sampler), on this machine only: an
    # RPC device's calls would carry the network's round trip.
    direct = protocol.direct_calls and not fresh_process and protocol.min_repeat_ms >= DIRECT_CALL_MIN_MS
    sampler = main_sampler(module, device, args, direct=direct)
    if paired is not None:
        reference_main = _reference_sampler(builder, paired, device, direct=direct)
        sampler = PairedSampler(sampler, reference_main, reference_s=paired.reference_s, probe=probe,
                                reference_number=PairedSampler.reference_calls(paired.reference_s,
                                                                               protocol.min_repeat_ms))
    timing = protocol.run(first_call_s, sampler, incumbent_s=incumbent_s, probe=probe, first_share=first_share)
    result = {"status": "ok", "samples": timing.samples, "number": timing.number, "contention": timing.contention,
              "dropped": timing.dropped, "timing": timing.mode}
    if isinstance(sampler, PairedSampler):
        result["device_state"] = sampler.state()
    return result


_loaded_reference: dict[str, tuple[Any, list]] = {}  # the reference's library path -> (module, arguments)


def _reference_sampler(builder: KernelBuilder, reference: PairedReference, device, *,
                       direct: bool) -> Callable[[int, int], list[float]]:
    """The reference kernel's sampler, loaded once per runner process (a session has one reference)."""
    import tvm

    if reference.path not in _loaded_reference:
        _loaded_reference.clear()
        module = tvm.runtime.load_module(reference.path)
        inputs, _ = reference_data(builder.workload)
        args = [tvm.runtime.tensor(a, device) for a in builder.kernel_arguments(reference.config, inputs)]
        module["main"](*args)  # its first call (page faults, a cold thread pool) is not a sample
        _loaded_reference[reference.path] = (module, args)
    module, args = _loaded_reference[reference.path]
    return main_sampler(module, device, args, direct=direct)


# With a protocol whose samples last at least this long, a sample of one call is a call of at least this long.
DIRECT_CALL_MIN_MS = 10.0


def main_sampler(module, device, args: list, *, direct: bool = False) -> Callable[[int, int], list[float]]:
    """``time_samples(number, repeat)`` for :meth:`TimingProtocol.run` over ``module["main"](*args)``.

    TVM's ``time_evaluator`` makes one untimed call before its samples, every time it is called: for
    a kernel of 50 ms a call, timed in rounds of three one-call samples, that is a third more kernel time
    per round, and the one confirming sample of a slow kernel costs two calls. With ``direct``, samples of
    one call (``number == 1``: the protocol asks for those only when a call lasts ``min_repeat_ms`` or
    more, see :data:`DIRECT_CALL_MIN_MS`) are timed here, call by call: the Python call around the kernel
    adds microseconds, under 0.1 % of a 10 ms call. Other samples stay with ``time_evaluator``.
    """
    main = module["main"]

    def time_samples(number: int, repeat: int) -> list[float]:
        if direct and number == 1:
            out = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                main(*args)
                out.append(time.perf_counter() - t0)
            return out
        result = module.time_evaluator("main", device, number=number, repeat=repeat, min_repeat_ms=0)(*args)
        return [float(s) for s in result.results]

    return time_samples
