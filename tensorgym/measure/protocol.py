"""The one timing protocol every kernel in tensorgym is measured with.

1. **Warm-up.** The kernel is called once (for a config seen for the first
   time, this call is the correctness check against the NumPy reference),
   then run for ``warmup_ms`` more, so that idle cores are awake and clocked
   up; the warm-up also yields the single-call duration ``t1``. The first
   kernel (or vendor library call) a fresh process times is called for
   ``process_warmup_ms`` first (:meth:`TimingProtocol.first_call`): two-thread
   kernels in a new process run at about half speed for their first 0.1-1 s
   on this 2-vCPU machine.
2. **Calls per sample.** ``number = ceil(min_repeat_ms / t1)``, so that each
   sample lasts at least ``min_repeat_ms`` and timer resolution does not matter.
3. **Samples.** A round takes about ``round_ms``: between ``min_samples`` and
   ``max_samples`` samples, each the mean seconds per call over ``number`` calls.
4. **Stability.** While the samples' robust spread (1.4826 * median absolute
   deviation / median, which a single interrupted sample does not inflate)
   exceeds ``target_spread``, another round is taken, as long as the sampling
   time stays within ``max_timing_ms`` (and the samples within
   ``max_total_samples``, when set: a GPU kernel's one-call samples of a few
   microseconds would otherwise need thousands to fill it).
5. **Summary.** The latency is the median of all samples; the coefficient of
   variation and the samples themselves are recorded with it.

Kernels use every core of the target (``TVM_NUM_THREADS``), as the vendor
libraries they are compared with do. On a 2-vCPU virtual machine two-thread
timings are noisier than one-thread ones (other work on either vCPU stalls
the parallel loop), which is why the protocol takes short samples, many of
them, and extends them when they disagree; bench/bench_measure.py prints the
resulting spread.

TVM kernels are timed with ``time_evaluator`` (a C++ loop, no Python overhead
per call); vendor libraries (PyTorch, NumPy) with the same steps in a Python
loop, because that is how a user calls them. Nothing else of tensorgym runs on
the cores while a kernel is timed: builds happen before, in their own phase.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable



_process_warmed_up = False  # has this process timed anything yet? (step 1's process warm-up)


@dataclass(frozen=True)
class TimingProtocol:
    warmup_ms: float = 20.0
    process_warmup_ms: float = 300.0
    min_repeat_ms: float = 10.0
    round_ms: float = 100.0
    min_samples: int = 3
    max_samples: int = 10
    target_spread: float = 0.02
    max_timing_ms: float = 300.0
    rtol: float = 1e-3  # max |out - ref| / max |ref| allowed by the correctness check
    max_total_samples: int | None = None  # also stop extending past this many samples (one-call GPU samples)

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples or min(self.min_repeat_ms, self.warmup_ms) < 0:
            raise ValueError(f"invalid timing protocol {self}")

    def first_call(self, call: Callable[[], object], *, force: bool = False) -> float:
        """Make a kernel's first call (the checked one) and return its duration.

        In a process that has not timed anything yet (or with ``force``) the
        kernel is first called over and over for ``process_warmup_ms``; then
        the duration returned is that of the last call.
        """
        global _process_warmed_up
        fresh = force or not _process_warmed_up
        _process_warmed_up = True
        deadline = time.perf_counter() + (self.process_warmup_ms / 1e3 if fresh else 0.0)
        while True:
            t0 = time.perf_counter()
            call()
            last = time.perf_counter() - t0
            if time.perf_counter() >= deadline:
                return last

    def run(self, first_call_s: float,
            time_samples: Callable[[int, int], list[float]]) -> tuple[list[float], int]:
        """Apply steps 1-5 after the first call; returns (samples in seconds per call, calls per sample).

        ``first_call_s`` is the duration of the first (warm-up/check) call;
        ``time_samples(number, repeat)`` returns ``repeat`` samples of ``number`` calls each.
        """
        single = max(first_call_s, 1e-9)
        if self.warmup_ms > single * 1e3:
            single = max(time_samples(math.ceil(self.warmup_ms / 1e3 / single), 1)[0], 1e-9)
        number = max(1, math.ceil(self.min_repeat_ms / 1e3 / single))
        sample_s = number * single
        repeat = min(self.max_samples, max(self.min_samples, round(self.round_ms / 1e3 / sample_s)))
        samples: list[float] = []
        spent = 0.0
        while True:
            samples += time_samples(number, repeat)
            spent += repeat * sample_s
            stable = robust_spread(samples) <= self.target_spread
            too_many = self.max_total_samples is not None and len(samples) + repeat > self.max_total_samples
            if stable or too_many or (spent + repeat * sample_s) * 1e3 > self.max_timing_ms:
                return samples, number

    def time_callable(self, fn: Callable[[], object]) -> tuple[list[float], int]:
        """Time a Python callable (a vendor library call) with this protocol."""

        def samples(number: int, repeat: int) -> list[float]:
            out = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                out.append((time.perf_counter() - t0) / number)
            return out

        return self.run(self.first_call(fn), samples)


def robust_spread(samples: list[float]) -> float:
    """1.4826 * MAD / median: the coefficient of variation for normal noise, blind to rare outliers."""
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    deviations = sorted(abs(s - median) for s in ordered)
    return 1.4826 * deviations[len(deviations) // 2] / median if median > 0 else 0.0
