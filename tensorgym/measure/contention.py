"""Telling a quiet machine from a busy one while a kernel is timed.

A timing taken while other processes compete for the cores is slow for a
reason that has nothing to do with the kernel, and it can look perfectly
stable (every sample equally slow). So every timing round is bracketed by two
:class:`CpuSnapshot` readings, and their difference says how much of the
cores' time the timing process did *not* get:

* **run-queue wait** (``/proc/self/task/*/schedstat``, second field): for
  each thread of the timing process, the nanoseconds it was ready to run but
  waited for a core because something else ran there. The kernel keeps it per
  thread, exactly (no sampling), and it is zero on a quiet machine whatever
  the kernel does: a sequential kernel's idle worker threads sleep, and
  sleeping is not waiting. This is the main signal.
* **steal** (``/proc/stat``, the cores this process may run on): time the
  hypervisor gave this virtual machine's cores to someone else; the guest's
  scheduler cannot see it as waiting. Counted in clock ticks (10 ms), so it
  only matters over whole rounds.

The *contention share* of an interval is ``(wait + steal) / (wall x cores)``:
0 on a quiet machine, 0.5 when the timing process got half of its cores.

Signals considered and not used: the process's CPU time against wall time
(a sequential kernel, or threads that sleep between parallel loops, use less
than ``cores x wall`` on a quiet machine too, and spinning threads use all of
it while they wait for a descheduled sibling), and the load average or the
count of runnable processes (an average over a minute, or an instant: neither
says what happened during a 100 ms round).

Where these files do not exist (not Linux, or a kernel without scheduler
statistics) the share is ``None``: unknown, never "quiet".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..record import BUSY_SHARE  # noqa: F401 - a round above this share was taken on a busy machine

# Why 2 %: a two-thread kernel whose threads lose 2 % of the cores' time runs ~4 % slower (the
# parallel loop waits for the late thread), about the timing protocol's own noise target.

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


@dataclass(frozen=True)
class CpuSnapshot:
    """What the scheduler had accounted at one moment (see the module docs)."""

    wall_s: float
    wait_ns: dict[int, int] | None  # thread id -> run-queue wait so far; None: not available
    steal_ticks: int | None


def _thread_waits() -> dict[int, int] | None:
    waits: dict[int, int] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            fields = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        if len(fields) >= 2:
            waits[int(tid)] = int(fields[1])
    return waits or None


def _steal_ticks(cores: frozenset[int]) -> int | None:
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    total = 0
    found = False
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        if int(name[3:]) in cores and len(values) >= 8:
            total += int(values[7])
            found = True
    return total if found else None


class ContentionProbe:
    """Reads :class:`CpuSnapshot` values of the calling process and turns pairs of them into shares."""

    def __init__(self, cores: frozenset[int] | None = None):
        if cores is None:
            cores = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
        self.cores = cores
        self.num_cores = max(1, len(cores))

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(time.perf_counter(), _thread_waits(), _steal_ticks(self.cores))

    def share(self, before: CpuSnapshot, after: CpuSnapshot) -> float | None:
        """The contention share between two snapshots (None: this machine cannot tell)."""
        wall = after.wall_s - before.wall_s
        if wall <= 0 or before.wait_ns is None or after.wait_ns is None:
            return None
        # Threads that started in between waited only after ``before``; threads that ended are lost.
        wait = sum(ns - before.wait_ns.get(tid, 0) for tid, ns in after.wait_ns.items()) / 1e9
        steal = 0.0
        if before.steal_ticks is not None and after.steal_ticks is not None:
            steal = (after.steal_ticks - before.steal_ticks) * _TICK_S
        return max(0.0, (wait + steal) / (wall * self.num_cores))


    def steal_share(self, before: CpuSnapshot, after: CpuSnapshot) -> float | None:
        """The share of the cores' time the hypervisor gave to other machines between two snapshots
        (None: this machine cannot tell)."""
        wall = after.wall_s - before.wall_s
        if wall <= 0 or before.steal_ticks is None or after.steal_ticks is None:
            return None
        return max(0.0, (after.steal_ticks - before.steal_ticks) * _TICK_S / (wall * self.num_cores))


def is_busy(share: float | None, threshold: float = BUSY_SHARE) -> bool:
    """Whether a contention share says the machine was busy (unknown shares are not)."""
    return share is not None and share > threshold
