"""Which mapping candidates a space keeps, and why the others are masked or pruned.

Seed 002 (GTA) adds a resource-constrained rule (its R5, "AddMemLimit") to
Ansor's sketch rules so that no program exceeds the hardware's on-chip
memories. On a CPU the scarce resources are the register files and the
caches; the rules, checked in this order (the first that fails names the
candidate's fate):

=============  =========  ======================================================================
rule           fate       a candidate fails it when
=============  =========  ======================================================================
``isa``        masked     the target's CPU lacks the intrinsic's instructions (its ISA flags)
``exact``      masked     the intrinsic is not exact for the workload's inputs (``vpmaddubsw``
                          saturates on 8-bit activations)
``same``       pruned     it generates the same kernel as another candidate that fuses fewer
                          loops: they differ only by loops of extent 1 (batch 1 fuses ``n`` for
                          nothing)
``padding``    pruned     less than :data:`MIN_UTILISATION` of the intrinsic's multiply-adds are
                          useful: the rest multiply the zero padding of the fused axes (a 3-channel
                          reduction on a 64-deep AMX tile)
``registers``  pruned     one call needs more vector (dot) or tile (AMX) registers than the CPU has
``cache``      pruned     the operands one output tile of the intrinsic streams over the whole
                          reduction (its weight panel and its activation rows) exceed the per-core
                          L2 cache, so that no tiling can keep them there between calls
``memory``     pruned     the activations an unfold duplicates (im2col: at least
                          :data:`UNFOLD_DUPLICATION` times the activations) exceed the last-level
                          cache (the weights and padded activations do not count: every
                          candidate of the layer reads them)
=============  =========  ======================================================================

Tile configs get the register rule too (:func:`register_block_fits`): the
accumulators of the register block plus the weight vectors they share and the
call's other live registers (:func:`vector_registers_needed`) must fit the
vector register file (a dot product keeps them in registers across the
reduction): 32 with AVX-512, 16 with AVX2 (``Target.vector_registers``), where
e.g. ``vpmaddwd``'s 4 x 2 register block (8 accumulators, 2 widened weight
vectors, the broadcast activations and the product) takes 12; and an AMX
register block's tiles (accumulators, A and B) must fit the L1 data cache (each
call loads and stores its accumulator tile).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ...target import Target
from .intrinsics import Intrinsic
from .nest import ACCUMULATOR_BYTES, MappedNest

MIN_UTILISATION = 0.5
RULES = ("isa", "exact", "same", "padding", "registers", "cache", "memory")
TILE_REGISTERS = 8  # AMX
# Packed activations at least this many times the activations are an unfold (im2col-like), which the
# memory rule judges; a zero-padding ring or a padded reduction alone stays below it.
UNFOLD_DUPLICATION = 2.0


@dataclass(frozen=True)
class Verdict:
    """Kept, or masked/pruned by ``rule`` because of ``reason``."""

    kept: bool
    rule: str = ""
    reason: str = ""

    @property
    def fate(self) -> str:
        if self.kept:
            return "kept"
        return "masked" if self.rule in ("isa", "exact") else "pruned"


KEPT = Verdict(True)


def judge(nests: list[MappedNest], target: Target) -> list[Verdict]:
    """A verdict per candidate nest. Of candidates that generate the same kernel, the one fusing the fewest
    loops (the first of those) stands for them; the others fail rule ``same``."""
    representative: dict[tuple, int] = {}
    for index, nest in enumerate(nests):
        key = nest.effective_key()
        best = representative.get(key)
        if best is None or nest.fused_loop_count < nests[best].fused_loop_count:
            representative[key] = index
    out = []
    for index, nest in enumerate(nests):
        same_as = representative[nest.effective_key()]
        out.append(_judge_one(nest, target, same_as if same_as != index else None))
    return out


def _judge_one(nest: MappedNest, target: Target, same_as: int | None) -> Verdict:
    intrinsic, res = nest.intrinsic, nest.resources
    missing = intrinsic.missing_isa(target)
    if missing:
        return Verdict(False, "isa", f"the CPU lacks {missing} ({intrinsic.instruction})")
    inexact = intrinsic.inexact_for(nest.workload.dtype)
    if inexact:
        return Verdict(False, "exact", inexact)
    if same_as is not None:
        return Verdict(False, "same", f"the same kernel as candidate {same_as} (it fuses loops of extent 1 more)")
    if res.utilisation < MIN_UTILISATION:
        return Verdict(False, "padding", f"only {100 * res.utilisation:.0f} % of the intrinsic's multiply-adds are "
                                         f"useful (< {100 * MIN_UTILISATION:.0f} %): the fused axes are padded "
                                         f"({nest.describe()})")
    if nest.tile and res.tile_registers > TILE_REGISTERS:
        return Verdict(False, "registers", f"one call needs {res.tile_registers} tile registers of {TILE_REGISTERS}")
    if not nest.tile and res.vector_registers > target.vector_registers:
        return Verdict(False, "registers", f"one call needs {res.vector_registers} vector registers of "
                                           f"{target.vector_registers}")
    if res.panel_bytes > target.l2_bytes:
        return Verdict(False, "cache", f"an output tile streams {res.panel_bytes / 1024:.0f} KiB of operands over the "
                                       f"reduction, more than the {target.l2_bytes / 1024:.0f} KiB L2")
    # Only what an unfold duplicates counts: every candidate of a layer reads its weights and activations,
    # packed or not, so their own size tells no candidate from another (a rule on it would refuse the layer:
    # BERT M3's 9 MiB of fp32 weights on an 8 MiB Haswell L3).
    if res.duplication >= UNFOLD_DUPLICATION and res.packed_activation_bytes > target.l3_bytes:
        return Verdict(False, "memory", f"the unfolded activations take {res.packed_activation_bytes / 2**20:.1f} "
                                        f"MiB ({res.duplication:.1f}x the activations), more than the "
                                        f"{target.l3_bytes / 2**20:.0f} MiB last-level cache")
    return KEPT


def vector_registers_needed(intrinsic: Intrinsic, calls: int, weight_tiles: int) -> int:
    """Vector registers a dot product's register block keeps live: its ``calls`` accumulators, the
    ``weight_tiles`` weight vectors they share, and what one call needs besides its accumulator and weights
    (the broadcast activations; ``vpmaddwd``'s and ``vpmaddubsw``'s product before it is added)."""
    return calls + weight_tiles + max(intrinsic.vector_registers - 2, 1)


def register_block_fits(nest: MappedNest, s3: dict[str, int], target: Target) -> str | None:
    """None if the register block ``s3`` (residual spatial loop -> innermost tile) fits, else why not."""
    calls = prod(s3.values())
    lanes_loop = nest.names["lanes"]
    weight_tiles = s3.get(lanes_loop, 1)
    intrinsic = nest.intrinsic
    if not nest.tile:
        needed = vector_registers_needed(intrinsic, calls, weight_tiles)
        if needed > target.vector_registers:
            return (f"the register block holds {calls} accumulators and {weight_tiles} weight vectors: "
                    f"{needed} > {target.vector_registers} vector registers")
        return None
    row_tiles = calls // weight_tiles
    tile_bytes = intrinsic.rows * 64  # every AMX tile here is 16 rows of 64 bytes
    needed = calls * intrinsic.rows * intrinsic.lanes * ACCUMULATOR_BYTES + (row_tiles + weight_tiles) * tile_bytes
    if needed > target.l1d_bytes:
        return (f"the register block's {calls} accumulator tiles and {row_tiles + weight_tiles} operand tiles take "
                f"{needed / 1024:.0f} KiB > the {target.l1d_bytes / 1024:.0f} KiB L1")
    return None
