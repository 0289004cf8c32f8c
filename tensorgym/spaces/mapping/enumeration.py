"""Mapping candidates: the ways an operator's loops can be mapped onto an intrinsic's axes (seed 002, GTA / AMOS).

Pure symbolic code (no TVM). An operator and an intrinsic are both described
the same way (:class:`Computation`): ordered loops, which of them are
reductions, and for each tensor the loops each of its dimensions' index
expressions mention. The operator's tensors play the intrinsic's operand roles
``A`` (data), ``B`` (weights) and ``C`` (output).

The rules (AMOS's compute abstraction, which GTA enumerates candidates with):

1. **Signature.** A loop's signature is the set of roles whose index
   expressions mention it. Conv2d NCHW: ``n, y, x`` -> {A, C}; ``f`` -> {B, C};
   ``rc, ry, rx`` -> {A, B}. Intrinsic ``i`` of a dot product -> {B, C}
   (``C[i] += A[r] * B[i, r]``): an axis takes a loop that indexes the
   weights and the output but not the data; ``r`` -> {A, B}.
2. **Matching.** A loop may map onto an intrinsic axis iff both have the same
   signature and kind (spatial or reduction).
3. **Basic tuples.** The Cartesian product over the intrinsic's axes (each
   axis's matching loops in the operator's loop order), minus the tuples in
   which two mapped loops index the same dimension of one tensor (conv2d:
   ``(y, ry)`` both index the data's rows, ``(x, rx)`` its columns).
4. **Candidates.** With ``n`` basic tuples and ``n <= 10``: every non-zero 0/1
   selection vector over them (in ``itertools.product`` order); otherwise the
   one-hot vectors whose loop extents equal the intrinsic's extents (all
   one-hots when none do) plus the all-ones vector. A selection maps each axis
   to the *union* of the loops its chosen tuples give that axis (these loops
   are fused onto it); selections giving the same mapping are merged, the
   first kept. Merged mappings are not checked against rule 3 again.

This reproduces GTA's Table 2 (the 7 basic tuples of conv2d onto a Tensor Core
``(i1, i2, r1)``, in order) and its 35 candidates, and gives 7 candidates for
conv2d onto a dot product ``(i, r)`` (``r`` <- any non-empty subset of
``{rc, ry, rx}``) and 1 for a matmul onto any intrinsic.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

MAX_FULL_ENUMERATION = 10  # basic tuples up to which every selection vector is tried (AMOS)

Mapping_ = tuple[tuple[str, tuple[str, ...]], ...]  # ((axis, fused loops), ...) in the intrinsic's axis order


@dataclass(frozen=True)
class Computation:
    """Loops and tensor accesses of an operator or an intrinsic.

    Args:
        loops: loop names, in order.
        reductions: the names of the reduction loops.
        tensors: role -> one entry per dimension: the loops its index expression mentions.
        extents: loop -> extent (optional; used by rule 4 beyond 10 basic tuples).
    """

    loops: tuple[str, ...]
    reductions: frozenset[str]
    tensors: Mapping[str, tuple[frozenset[str], ...]]
    extents: Mapping[str, int] = field(default_factory=dict)

    def signature(self, loop: str) -> frozenset[str]:
        """The roles whose index expressions mention ``loop``."""
        return frozenset(role for role, dims in self.tensors.items() if any(loop in dim for dim in dims))

    def kind(self, loop: str) -> str:
        return "reduction" if loop in self.reductions else "spatial"


def computation(loops: Sequence[str], reductions: Sequence[str], tensors: Mapping[str, Sequence[Sequence[str]]],
                extents: Mapping[str, int] | None = None) -> Computation:
    """A :class:`Computation` from plain sequences."""
    return Computation(tuple(loops), frozenset(reductions),
                       {role: tuple(frozenset(dim) for dim in dims) for role, dims in tensors.items()},
                       dict(extents or {}))


def dot_product(lanes: int = 16, depth: int = 4) -> Computation:
    """``C[i] += A[r] * B[i, r]``: AVX-512 VNNI / BF16 dot products, the FP32 FMA outer-product step."""
    return computation(("i", "r"), ("r",), {"A": [["r"]], "B": [["i"], ["r"]], "C": [["i"]]},
                       {"i": lanes, "r": depth})


def matrix_multiply(rows: int = 16, lanes: int = 16, depth: int = 16, names=("i1", "i2", "r1")) -> Computation:
    """``C[i1, i2] += A[i1, r] * B[r, i2]``: an AMX tile multiply, or a Tensor Core ``mma``."""
    i1, i2, r = names
    return computation((i1, i2, r), (r,), {"A": [[i1], [r]], "B": [[r], [i2]], "C": [[i1], [i2]]},
                       {i1: rows, i2: lanes, r: depth})


def axis_loops(op: Computation, intrinsic: Computation) -> dict[str, list[str]]:
    """Rules 1-2: intrinsic axis -> the operator loops that may map onto it, in operator order."""
    return {axis: [loop for loop in op.loops
                   if op.signature(loop) == intrinsic.signature(axis) and op.kind(loop) == intrinsic.kind(axis)]
            for axis in intrinsic.loops}


def basic_tuples(op: Computation, intrinsic: Computation) -> list[tuple[str, ...]]:
    """Rule 3: one operator loop per intrinsic axis, no two indexing the same tensor dimension."""
    options = axis_loops(op, intrinsic)
    out = []
    for combo in itertools.product(*(options[axis] for axis in intrinsic.loops)):
        clash = any(sum(loop in dim for loop in combo) > 1 for dims in op.tensors.values() for dim in dims)
        if not clash:
            out.append(combo)
    return out


def candidates(op: Computation, intrinsic: Computation) -> list[Mapping_]:
    """Rule 4: the distinct mappings, each axis -> the loops fused onto it (in operator order)."""
    tuples = basic_tuples(op, intrinsic)
    n = len(tuples)
    if n == 0:
        return []
    if n <= MAX_FULL_ENUMERATION:
        vectors = [v for v in itertools.product((0, 1), repeat=n) if any(v)]
    else:
        def fits(t: tuple[str, ...]) -> bool:
            return all(op.extents.get(loop) == intrinsic.extents.get(axis) for loop, axis in zip(t, intrinsic.loops))

        hot = [j for j in range(n) if op.extents and intrinsic.extents and fits(tuples[j])] or list(range(n))
        vectors = [tuple(int(j == i) for j in range(n)) for i in hot] + [tuple([1] * n)]
    order = {loop: i for i, loop in enumerate(op.loops)}
    seen: set[Mapping_] = set()
    out: list[Mapping_] = []
    for vector in vectors:
        chosen = [tuples[j] for j in range(n) if vector[j]]
        mapping = tuple((axis, tuple(sorted({t[a] for t in chosen}, key=order.__getitem__)))
                        for a, axis in enumerate(intrinsic.loops))
        if mapping not in seen:
            seen.add(mapping)
            out.append(mapping)
    return out


def operator_of(workload) -> Computation:
    """The :class:`Computation` of a tensorgym workload: its loops and accesses, data/weights/output as A/B/C."""
    accesses = workload.accesses
    names = list(accesses)  # inputs first (data, weights), output last
    roles = dict(zip(names, ("A", "B", "C")))
    return computation(
        [lp.name for lp in workload.loops], [lp.name for lp in workload.reduction_loops],
        {roles[name]: [[loop for loop, _ in dim] for dim in dims] for name, dims in accesses.items()},
        {lp.name: lp.extent for lp in workload.loops},
    )


def intrinsic_computation(intrinsic) -> Computation:
    """The :class:`Computation` of an :class:`~.intrinsics.Intrinsic` (its axis names: ``i, r`` or ``i1, i2, r``)."""
    if intrinsic.shape == "dot":
        return dot_product(intrinsic.lanes, intrinsic.depth)
    return matrix_multiply(intrinsic.rows, intrinsic.lanes, intrinsic.depth, names=("i1", "i2", "r"))
