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
   time stays within ``max_timing_ms`` (and the samples, busy rounds' included,
   within ``max_total_samples``, when set: a GPU kernel's one-call samples of a few
   microseconds would otherwise need thousands to fill it).
5. **Summary.** The latency is the median of all samples; the coefficient of
   variation and the samples themselves are recorded with it.

These additions make the protocol cheaper and more honest:

* **Contention** (:mod:`.contention`). Every round is bracketed by readings of
  the scheduler's accounts; a round in which the timing process lost more than
  ``busy_share`` of its cores' time to other processes (run-queue wait, or the
  hypervisor's steal) is set aside and taken again, for up to ``busy_retime_ms``
  more. The result carries the contention share of the rounds it kept and how
  many samples it set aside; if every round was busy, it keeps them and says so
  (its share is above ``busy_share``): such a latency is what a busy machine gave.
* **Short timing.** When the caller knows the fastest latency measured so far
  for the same workload (the *incumbent*) and the kernel's first call already
  took ``short_factor`` times that, one more sample is taken; if it confirms
  the kernel is that slow on a quiet machine (a busy sample confirms nothing), the
  timing stops there and is marked ``short``
  (the latency is that sample: what was measured, in less time). A slow kernel
  on BERT M3 costs a few calls instead of a full round.
* **Early stop.** A kernel whose checked call alone took ``stop_factor`` (10)
  times the incumbent, on a quiet machine (the call is bracketed by the same
  contention readings as a round), is not timed at all: the record is ``short``
  with that one call as its only sample. Ten times is far beyond what a cold
  first call adds on its own (the check's output buffer is fresh, the thread
  pool may be asleep: fractions of a millisecond, or at most about a tenth of
  a long call), so such a kernel is at least several times slower than the best known
  whatever a full timing would say, and the full timing of a kernel of 0.5-2 s
  per call on BERT M3 (one more call, then rounds) is what the random agent's
  trials spent most of their time on. The latency is an honest bound: what one
  call took, within about a tenth of what a full timing gives (median ratios
  0.96-1.12 on R5 and M3 in bench/reports/bench_measure*.txt), for a kernel
  that is in any case several times slower than the best known; the
  record says it is short, so that nothing mistakes it for a full timing
  (:meth:`tensorgym.evaluator.Evaluator.time_in_full` completes it when it
  matters). A busy checked call, or one of unknown contention on a machine
  without scheduler statistics, falls back to the confirmation sample above.

Kernels use every core of the target (``TVM_NUM_THREADS``), as the vendor
libraries they are compared with do. On a 2-vCPU virtual machine two-thread
timings are noisier than one-thread ones (other work on either vCPU stalls
the parallel loop), which is why the protocol takes short samples, many of
them, and extends them when they disagree; bench/bench_measure.py prints the
resulting spread.

TVM kernels are timed with ``time_evaluator`` (a C++ loop, no Python overhead
per call), except samples of one call, which last 10 ms or more: those are timed
around the call itself, which spares the extra untimed call ``time_evaluator``
makes each time it is called (:func:`tensorgym.measure.tasks.main_sampler`);
vendor libraries (PyTorch, NumPy) with the same steps in a Python loop,
because that is how a user calls them. Nothing else of tensorgym runs on
the cores while a kernel is timed: builds happen before, in their own phase.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from .contention import BUSY_SHARE, ContentionProbe, is_busy

_process_warmed_up = False  # has this process timed anything yet? (step 1's process warm-up)


FULL = "full"
SHORT = "short"


@dataclass(frozen=True)
class Timing:
    """What :meth:`TimingProtocol.run` measured.

    ``samples`` are seconds per call, ``number`` calls each. ``contention`` is the
    largest contention share among the rounds the samples come from (None: this
    machine cannot tell); ``dropped`` counts samples set aside because their round
    was busy; ``mode`` is ``"full"`` or ``"short"`` (see the module docs).
    """

    samples: list[float]
    number: int
    contention: float | None = None
    dropped: int = 0
    mode: str = FULL
    round_shares: list[float] = field(default_factory=list)  # every round's share, kept or not

    @property
    def busy(self) -> bool:
        return is_busy(self.contention)


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
    busy_share: float = BUSY_SHARE  # rounds above this contention share are taken again
    busy_retime_ms: float = 200.0  # sampling time allowed for rounds taken again (contention that lasts is flagged)
    short_factor: float = 3.0  # first call this many times slower than the incumbent: short timing (0: never)
    stop_factor: float = 10.0  # checked call this many times slower than the incumbent: early stop (0: never)
    direct_calls: bool = True  # one-call samples timed around the call (see tasks.main_sampler); False: time_evaluator
    max_total_samples: int | None = None  # also stop extending past this many samples (one-call GPU samples)

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples or min(self.min_repeat_ms, self.warmup_ms) < 0:
            raise ValueError(f"invalid timing protocol {self}")
        # Below 2x a kernel may be the next best after a noisy first call: stopping it there would be a guess.
        if self.stop_factor and self.stop_factor < 2.0:
            raise ValueError(f"stop_factor must be 0 (never stop early) or at least 2, got {self.stop_factor}")

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

    def run(self, first_call_s: float, time_samples: Callable[[int, int], list[float]], *,
            incumbent_s: float | None = None, probe: ContentionProbe | None = None,
            first_share: float | None = None) -> Timing:
        """Apply steps 1-5 after the first call (see the module docs).

        ``first_call_s`` is the duration of the first (warm-up/check) call;
        ``time_samples(number, repeat)`` returns ``repeat`` samples of ``number`` calls each;
        ``incumbent_s`` is the fastest latency known for the workload (enables short timing and the
        early stop); ``first_share`` is the contention share seen during the first call (None: not
        known, and then the early stop waits for a confirming sample).
        """
        probe = probe or ContentionProbe()
        shares: list[float] = []
        if self.stopped_early(first_call_s, incumbent_s, first_share):
            return Timing([first_call_s], 1, first_share, 0, SHORT, [first_share])  # type: ignore[list-item]

        def rounds(number: int, repeat: int) -> tuple[list[float], float | None]:
            before = probe.snapshot()
            new = time_samples(number, repeat)
            share = probe.share(before, probe.snapshot())
            if share is not None:
                shares.append(share)
            return new, share

        single = max(first_call_s, 1e-9)
        if self.short_factor and incumbent_s and single > self.short_factor * incumbent_s:
            number = max(1, math.ceil(self.min_repeat_ms / 1e3 / single))
            sample, share = rounds(number, 1)
            if sample[0] > self.short_factor * incumbent_s and not is_busy(share, self.busy_share):
                return Timing(sample, number, share, 0, SHORT, shares)
            # The first call misled (cold caches), or the machine was busy (a slow sample then says nothing
            # of the kernel): time it in full, where busy rounds are taken again.
            single = sample[0]
        if self.warmup_ms > single * 1e3:
            single = max(time_samples(math.ceil(self.warmup_ms / 1e3 / single), 1)[0], 1e-9)
        number = max(1, math.ceil(self.min_repeat_ms / 1e3 / single))
        sample_s = number * single
        repeat = min(self.max_samples, max(self.min_samples, round(self.round_ms / 1e3 / sample_s)))
        samples: list[float] = []
        busy_samples: list[float] = []
        clean_shares: list[float] = []  # of the rounds in ``samples``
        spent = busy_spent = 0.0
        while True:
            new, share = rounds(number, repeat)
            # Another round would take more samples than allowed (kept and set aside alike)?
            full = (self.max_total_samples is not None
                    and len(samples) + len(busy_samples) + len(new) + repeat > self.max_total_samples)
            if is_busy(share, self.busy_share):
                busy_samples += new
                busy_spent += repeat * sample_s
                if not full and (busy_spent + repeat * sample_s) * 1e3 <= self.busy_retime_ms:
                    continue  # take the round again
                spent += repeat * sample_s  # out of time for taking rounds again
            else:
                samples += new
                if share is not None:
                    clean_shares.append(share)
                spent += repeat * sample_s
            stable = len(samples) >= self.min_samples and robust_spread(samples) <= self.target_spread
            if stable or full or (spent + repeat * sample_s) * 1e3 > self.max_timing_ms:
                break
        if len(samples) >= self.min_samples:
            contention = max(clean_shares) if clean_shares else None
            return Timing(samples, number, contention, len(busy_samples), FULL, shares)
        # The machine stayed busy: report every sample it gave, flagged by the largest share.
        return Timing(samples + busy_samples, number, max(shares) if shares else None, 0, FULL, shares)

    def stopped_early(self, first_call_s: float, incumbent_s: float | None, first_share: float | None) -> bool:
        """Whether a kernel is stopped after its checked call (see "Early stop" in the module docs)."""
        return bool(self.stop_factor and incumbent_s and first_share is not None
                    and first_call_s > self.stop_factor * incumbent_s and not is_busy(first_share, self.busy_share))

    def time_callable(self, fn: Callable[[], object], *, incumbent_s: float | None = None) -> Timing:
        """Time a Python callable (a vendor library call) with this protocol."""
        return self.run(self.first_call(fn), callable_sampler(fn), incumbent_s=incumbent_s)


def callable_sampler(fn: Callable[[], object], *, warm: bool = False) -> Callable[[int, int], list[float]]:
    """``time_samples(number, repeat)`` over a Python callable: each sample the mean of ``number`` calls in a loop.

    ``warm``: one untimed call before each sample, as TVM's ``time_evaluator`` makes before its samples. A sampler
    timed in alternation with a TVM kernel's needs it: without it, each of its samples starts on caches the kernel
    just filled, and the pair reads 1-3 % in the kernel's favour (measured on a 2-vCPU Zen 4 against oneDNN's
    convolutions, ``bench/bench_paired.py bias``)."""

    def samples(number: int, repeat: int) -> list[float]:
        out = []
        for _ in range(repeat):
            if warm:
                fn()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - t0) / number)
        return out

    return samples


def robust_spread(samples: list[float]) -> float:
    """1.4826 * MAD / median: the coefficient of variation for normal noise, blind to rare outliers."""
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    deviations = sorted(abs(s - median) for s in ordered)
    return 1.4826 * deviations[len(deviations) // 2] / median if median > 0 else 0.0
