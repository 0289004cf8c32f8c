"""Who failed: the kernel, or the machine it was measured on.

A kernel's own faults are final records (``build_error``, ``runtime_error``,
``timeout``, ``wrong_result``). Faults of the machine are not the kernel's and
must not be stored as if they were: the :class:`~tensorgym.measure.Measurer`
retries them and, if they persist, stores ``infra_error``, which is measured
again later. This module holds the rules that tell them apart:

* **Signals.** A kernel that crashes raises a synchronous fault signal in the
  process that runs it (``SIGSEGV``, ``SIGBUS``, ``SIGFPE``, ``SIGILL``; ``SIGABRT``
  when it corrupts the heap; ``SIGTRAP``/``SIGSYS``). The runner reports when it
  enters the kernel (:func:`tensorgym.measure.worker.mark`), so a fault signal
  counts against the kernel only if the kernel was running. Any other end of
  the process, ``SIGKILL`` (the OOM killer, an operator), ``SIGTERM``, an exit
  code, or a fault before the kernel started (loading the library), is the
  machine's. The measurer's own kills (time limits) are timeouts, which it
  knows without looking at signals; a timeout counts against the kernel only
  if the kernel was running (a runner still starting up on a loaded machine
  is the machine's problem). A builder that dies of a fault signal
  is a compiler crash on that schedule (``build_error``); one killed otherwise
  is the machine's.
* **Errors.** ``OSError`` s of a full, failing or read-only disk, out of memory
  or out of file handles (``ENOSPC``, ``EIO``, ``EDQUOT``, ``EROFS``, ``ENOMEM``,
  ``EMFILE``, ``ENFILE``), ``MemoryError``, and messages that carry those errors'
  texts (``ld: ... No space left on device``) are the machine's; so is a build
  that fails while its output or temporary directory has (almost) no free space.
  So is a library the dynamic loader cannot map (``failed to map segment from
  shared object``): the process's address space or its count of memory maps
  is full, which says nothing of the kernel in it.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal

from ..errors import TensorgymError

# Raised by a process on itself when the code it runs faults.
KERNEL_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
                            signal.SIGTRAP, signal.SIGSYS})
INFRA_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EMFILE,
                          errno.ENFILE})
INFRA_TEXTS = (*(os.strerror(code) for code in sorted(INFRA_ERRNOS)),  # "No space left on device", ...
               "failed to map segment from shared object")  # the dynamic loader's, when it cannot map a library
LOW_DISK_BYTES = 1 << 20  # a build that fails with less free space than this is not trusted as the kernel's fault


class InfrastructureFault(Exception):
    """Raised in a worker when the machine, not the kernel, made a call fail."""


def infrastructure_cause(exc: BaseException) -> str | None:
    """Why ``exc`` is the machine's fault (see the module docs), or None if it may be the kernel's."""
    if isinstance(exc, InfrastructureFault):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, OSError) and exc.errno in INFRA_ERRNOS:
        return errno.errorcode.get(exc.errno, str(exc.errno)) + f" ({exc.strerror})"
    text = str(exc)
    for known in INFRA_TEXTS:
        if known in text:
            return known
    return None


def low_disk(*directories: str) -> str | None:
    """``"no space left in DIR (N bytes free)"`` for the first of ``directories`` that is (almost) full."""
    for directory in directories:
        try:
            free = shutil.disk_usage(directory).free
        except OSError:
            continue
        if free < LOW_DISK_BYTES:
            return f"no space left in {directory} ({free} bytes free)"
    return None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crash_is_kernel_fault(signal_number: int | None, phase: str, phases_reported: bool = True) -> bool:
    """Whether a runner process that died of ``signal_number`` (None: it exited) in ``phase`` was
    killed by its kernel (see the module docs). A runner that does not report phases
    (``phases_reported=False``) is taken at its signal alone."""
    return signal_number in KERNEL_SIGNALS and (phase == "kernel" or not phases_reported)


def timeout_is_kernel_fault(phase: str, phases_reported: bool = True) -> bool:
    """Whether a run that outlived its time limit in ``phase`` was held up by its kernel: a runner
    that had not reached the kernel yet (still starting, loading the library) was slow, not the kernel."""
    return phase == "kernel" or not phases_reported


def build_crash_is_schedule_fault(signal_number: int | None) -> bool:
    """Whether a builder that died of ``signal_number`` crashed on the schedule (a compiler crash)."""
    return signal_number in KERNEL_SIGNALS


class InfrastructureError(TensorgymError, RuntimeError):
    """Kernel after kernel failed because of the machine (not the kernels): measuring stopped.

    Raised by the measurer when several kernels in a row ended in ``infra_error`` after their
    retries (a runner that dies before it reaches any kernel, a full build directory ...); the
    records made before are kept, so running again once the machine is fixed resumes.
    """
