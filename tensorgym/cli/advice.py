"""Which space to tune an operator in, and the line ``tensorgym tune`` prints when the user's space trails.

The spaces differ in how close they get to the vendor library, and the
default (``tiles``, the space the learning agents search) is not the one that
gets closest on a CPU:

* **fp32 conv2d and matmul on a CPU: ``microkernel``** (calibrated register
  microkernels, searched by ``random-structured``). Measured at 64 measurements
  against the vendor's best timed in the same run: 0.91-1.10x on ResNet R5,
  1.03x on YOLO Y9, 0.94-0.97x on BERT M3 (AMD Zen 3, AVX2); 0.97-1.00x on R5,
  0.90x on M3, 1.02x on Y9 (Intel Xeon, ``bench/reports/bench_kernels.txt``).
  The tiles space reached about 0.5x on the Zen 3 and 0.43x (R5) / 0.57x (M3)
  on the Xeon with DGD; on an AMD Zen 4 its best config of a 4,096-config R5
  landscape is at the vendor (``bench/reports/bench_microkernel.txt``), so
  how far it trails depends on the CPU and the budget.
* **int8 and bf16 on a CPU: ``mapping``** (the CPU's dot-product and tile
  intrinsics), where the CPU has an intrinsic for the dtype that computes it
  exactly (``tensorgym info`` lists them); it is the only CPU space for those
  dtypes (1.6-2.1x the vendor in int8 on an AMX Xeon, ``bench/reports/bench_mapping.txt``).
* **GPUs and other operators: no advice.** The CUDA path (GPU tiles sketch,
  ``cutlass``) has run once, on one GPU, with one seed: too little to advise
  from; and only conv2d and matmul have a microkernel space: no measured
  figure says another space would do better.

:func:`space_advice` is the decision, a pure function of what ``tune`` knows
after its run (the operator, dtype, space, target and the ratio to the
vendor), so it is tested without measuring anything.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass

# A kernel below this share of the vendor is "trailing". Why 0.8: on a shared 2-vCPU machine a vendor's own
# timing moves by about +-8 % between runs and a tuned kernel's best-of-many is biased up by a few percent, so
# a ratio within 20 % of 1.0 may be parity on the next run; below 0.8 the gap is larger than that noise on both
# sides. The spaces advised below measured 0.90-1.10x on every CPU tried, the tiles space 0.43-0.57x (see the
# module docs), so 0.8 separates them with margin on both sides.
TRAILING_RATIO = 0.8


@dataclass(frozen=True)
class Advice:
    """A space to tune in instead, the agent that searches it, and why (one clause)."""

    space: str
    agent: str
    why: str


_MICROKERNEL = Advice("microkernel", "random-structured",
                      "its calibrated register microkernels reached 0.9-1.1x the vendor on fp32 conv2d and matmul")
_MAPPING = Advice("mapping", "random", "it maps {dtype} onto this CPU's {dtype} intrinsics")


def best_space(op: str, dtype: str, target_kind: str = "llvm", mapping_dtypes: Collection[str] = ()) -> Advice | None:
    """The space measured closest to the vendor for ``op`` in ``dtype`` on a target of ``target_kind``, or None
    where no space was measured to do better than another. ``mapping_dtypes``: the dtypes this CPU has an exact
    mapping intrinsic for (``tensorgym info``)."""
    if target_kind != "llvm":  # the GPU spaces ran once, one seed: too little measured to advise from
        return None
    if dtype == "float32":
        return _MICROKERNEL if op in ("conv2d", "matmul") else None
    if dtype in mapping_dtypes:
        return Advice(_MAPPING.space, _MAPPING.agent, _MAPPING.why.format(dtype=dtype))
    return None


def space_advice(op: str, dtype: str, space: str, ratio: float | None, *, target_kind: str = "llvm",
                 mapping_dtypes: Collection[str] = ()) -> Advice | None:
    """The space to try when a kernel tuned in ``space`` reached ``ratio`` times the vendor, or None: when there is
    no ratio (no vendor timing, or one taken on a busy machine), when it is at or above :data:`TRAILING_RATIO`,
    when no space does better for this operator and target, or when the user already tuned in that space."""
    if ratio is None or not math.isfinite(ratio) or ratio >= TRAILING_RATIO:
        return None
    best = best_space(op, dtype, target_kind, mapping_dtypes)
    return best if best is not None and best.space != space else None


def advice_line(advice: Advice, ratio: float, space: str, env_id: str, options: Sequence[str] = ()) -> str:
    """The one line ``tune`` prints: the ratio, the space to try, and the command (``options``: the user's
    options that keep it the same problem and budget, e.g. ``["--budget", "64"]``)."""
    command = shlex.join(["tensorgym", "tune", env_id, "--space", advice.space, "--agent", advice.agent, *options])
    return (f"advice: {ratio:.2f}x the vendor is below {TRAILING_RATIO}x in the {space} space; try the "
            f"{advice.space} space ({advice.why}): {command}")
