"""How large a workload gym.make accepts, and how long making (and first using) its env takes.

    python bench/bench_extents.py

Workloads are bounded up front (tensorgym.workloads: MAX_EXTENT per loop, MAX_TENSOR_ELEMENTS per
tensor, MAX_FLOPS per kernel). This prints, for the largest accepted extents (a power of two and a
highly composite number below the limit, whose 4-level tile splits number in the hundreds of
thousands) and for the largest square matmul: the seconds gym.make takes, then the first
``sample_many(rng, 64)``, ``neighbours`` and ``hop_mask`` of its space (nothing is compiled: the
env gets a synthetic measurer), and how fast an extent over the limit is refused.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # fakes.SyntheticMeasurer

import tensorgym  # noqa: E402,F401 - registers the ids
from fakes import SyntheticMeasurer  # noqa: E402
from tensorgym.factors import count_factorizations  # noqa: E402
from tensorgym.text import format_table  # noqa: E402
from tensorgym.workloads import MAX_EXTENT, MAX_FLOPS, MAX_TENSOR_ELEMENTS, WorkloadError  # noqa: E402

CASES = [
    ("largest extent, 2^24", dict(M=MAX_EXTENT, N=1, K=1)),
    ("highly composite, 14414400", dict(M=14414400, N=1, K=1)),
    ("14414400 x 16 x 16", dict(M=14414400, N=16, K=16)),
    ("largest square matmul, 16384^3", dict(M=16384, N=16384, K=16384)),
]


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - t0


def main() -> int:
    print(f"limits: extent <= {MAX_EXTENT}, tensor <= {MAX_TENSOR_ELEMENTS} elements, kernel <= {MAX_FLOPS:.0e} FLOPs")
    rows = []
    for label, shape in CASES:
        env, make_s = timed(gym.make, "tensorgym/Matmul-v0", db=":memory:", measurer=SyntheticMeasurer(), **shape)
        space = env.unwrapped.search_space
        configs, sample_s = timed(space.sample_many, np.random.default_rng(0), 64)
        _, neighbours_s = timed(space.neighbours, configs[0])
        _, mask_s = timed(space.hop_mask, configs[0])
        splits = count_factorizations(shape["M"], 4, space.max_innermost)
        rows.append((label, f"{splits}", f"{make_s * 1e3:.1f}", f"{sample_s * 1e3:.1f}", f"{neighbours_s * 1e3:.1f}",
                     f"{mask_s * 1e3:.2f}"))
        env.close()
    print(format_table(rows, ("workload", "4-level splits of M", "gym.make ms", "64 samples ms", "neighbours ms",
                              "hop_mask ms")))
    for shape in (dict(M=MAX_EXTENT + 1, N=1, K=1), dict(M=99999999999, N=1, K=1)):
        t0 = time.perf_counter()
        try:
            gym.make("tensorgym/Matmul-v0", db=":memory:", **shape)
        except WorkloadError as exc:
            print(f"M={shape['M']}: refused in {(time.perf_counter() - t0) * 1e3:.2f} ms: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
