"""Paired timing: every kernel timed in alternation with one fixed reference kernel, keeping the ratio.

On a shared virtual machine the same kernel re-times 10-25 % apart within an hour: the
hypervisor's clock, its steal and the neighbours' memory traffic change from minute to minute,
and whole stretches run at half speed. A ranking of kernels within a few % of each other (the
near-peak configs a landscape must order) then says more about when each was timed than about
the kernels. Two timings taken within a few milliseconds of each other share that state, so their
ratio does not carry it.

In paired mode the :class:`~tensorgym.measure.Measurer` first times the *reference* (a config of
the same space, e.g. a landscape's anchor) with the normal protocol: its latency, ``reference_s``,
is the scale of the whole measuring session. Then every sample of a kernel is taken between two
samples of the reference (``r0 k1 r1 k2 r2 ...``), and becomes
``k_i / mean(r_{i-1}, r_i) * reference_s``: the kernel's latency in a machine whose reference
runs as fast as it did at the start. The protocol's steps (rounds, stability, busy rounds taken
again) act on those samples as on plain ones, so a record reads in seconds and GFLOP/s like any
other. Each record's ``device_state`` says how it was measured:

* ``paired_ratio``: the kernel's latency over the reference's, the figure that is comparable
  between sessions, whatever their ``reference_s``;
* ``reference_s``: the session's scale;
* ``reference_drift``: the median of the reference's samples during this record over
  ``reference_s``, minus one (a disturbed stretch shows here, whatever the kernel did);
* ``steal``: the share of the cores' time the hypervisor gave to other machines meanwhile
  (``/proc/stat``; ticks of 10 ms, so only over whole records).

The price is time: one reference sample per kernel sample, so a paired timing takes about
twice as long. Use it where near-peak kernels must be ranked (landscapes, re-timing winners),
not for a search's every trial.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..config import Config
from .contention import ContentionProbe, CpuSnapshot

Sampler = Callable[[int, int], list[float]]  # time_samples(number, repeat): seconds per call, one per sample

STATE_KEYS = ("paired_ratio", "reference_s", "reference_drift", "steal")


@dataclass(frozen=True)
class PairedReference:
    """What a paired runner call receives: the reference kernel of the space measured.

    ``path`` is its built library, ``config`` its config (the space's builder gives its arguments),
    ``reference_s`` its latency when the session started (the scale of every paired sample).
    """

    config: Config
    path: str
    reference_s: float

    def __post_init__(self) -> None:
        if not self.reference_s > 0:
            raise ValueError(f"the reference's latency must be positive, got {self.reference_s}")


class PairedSampler:
    """``time_samples(number, repeat)`` for :meth:`~tensorgym.measure.protocol.TimingProtocol.run`: each
    kernel sample between two reference samples, returned as ``ratio * reference_s`` (see the module docs).

    ``kernel`` and ``reference`` are plain samplers; the reference's samples are ``reference_number``
    calls long (about the protocol's ``min_repeat_ms``, like the kernel's).
    """

    def __init__(self, kernel: Sampler, reference: Sampler, *, reference_s: float, reference_number: int,
                 probe: ContentionProbe | None = None):
        self._kernel = kernel
        self._reference = reference
        self.reference_s = reference_s
        self.reference_number = max(1, int(reference_number))
        self.reference_samples: list[float] = []
        self._probe = probe or ContentionProbe()
        self._start: CpuSnapshot = self._probe.snapshot()
        self._last: float | None = None

    @staticmethod
    def reference_calls(reference_s: float, min_repeat_ms: float) -> int:
        """Calls of the reference per sample: enough to last ``min_repeat_ms``, as the kernel's samples do."""
        return max(1, math.ceil(min_repeat_ms / 1e3 / max(reference_s, 1e-9)))

    def _reference_sample(self) -> float:
        sample = self._reference(self.reference_number, 1)[0]
        self.reference_samples.append(sample)
        return sample

    def __call__(self, number: int, repeat: int) -> list[float]:
        if self._last is None:
            self._last = self._reference_sample()
        out = []
        for _ in range(repeat):
            kernel = self._kernel(number, 1)[0]
            after = self._reference_sample()
            out.append(kernel / (0.5 * (self._last + after)) * self.reference_s)
            self._last = after
        return out

    def state(self) -> dict[str, float]:
        """What the record's ``device_state`` keeps of this timing, but its ratio (the measurer has it):
        ``reference_s``, ``reference_drift`` and ``steal`` (when this machine tells)."""
        state = {"reference_s": self.reference_s}
        if self.reference_samples:
            ordered = sorted(self.reference_samples)
            state["reference_drift"] = ordered[len(ordered) // 2] / self.reference_s - 1.0
        steal = self._probe.steal_share(self._start, self._probe.snapshot())
        if steal is not None:
            state["steal"] = steal
        return state

