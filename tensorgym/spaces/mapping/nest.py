"""What a mapping candidate makes of a workload: the mapped loop nest, its packed layouts and what they cost.

A :class:`Candidate` is an intrinsic and a mapping (intrinsic axis -> the
operator loops fused onto it, :mod:`.enumeration`). Its :class:`MappedNest`
(pure Python, no TVM) is the geometry the kernel is generated from
(:mod:`.kernels`):

* the **fused extents**, padded up to the intrinsic's: the reduction loops
  ``S`` fused onto ``r`` (``Rf`` -> ``Rfp``, a multiple of ``depth``), the output
  channels (conv ``f``, matmul ``j``) on ``i``/``i2`` (-> a multiple of
  ``lanes``), and for a tile intrinsic the spatial loops ``I`` fused onto
  ``i1`` (-> a multiple of ``rows``);
* the **residual loops**, what is left outside the intrinsic, which the space
  tiles like the ``tiles`` space tiles a plain loop nest:

  ========================  ===========================================  ====================
  loop                      what it counts                               name
  ========================  ===========================================  ====================
  output-channel blocks     ``Fp / lanes`` (matmul: ``Np / lanes``)      ``f`` (matmul ``j``)
  fused-row blocks (tile)   ``Ifp / rows`` (matmul: ``Mp / rows``)       ``m`` (matmul ``i``)
  other spatial loops       conv ``n, y, x`` not fused; matmul ``i``     their names
  fused-reduction blocks    ``Rfp / depth`` (matmul: ``Kp / depth``)     ``r`` (matmul ``k``)
  other reduction loops     conv ``rc, ry, rx`` not fused (``T``)         their names
  ========================  ===========================================  ====================

* the **packed layouts**: weights ``[Fp/lanes, *T, Rfp/group, lanes,
  group]`` (for ``S = {rc, ry, rx}``: ``[K/16, Rf/4, 16, 4]``); activations
  packed so that the reduction the intrinsic reads is contiguous: for a dot
  product ``[N, C if rc not fused, OH if ry fused else Hp, OW if rx fused else
  Wp, Rfp]`` (``S = {rc}``: NHWC with the zero border; ``S = {rc, ry, rx}``:
  im2col), for a tile ``[*spatial not fused, *T, Ifp, Rfp]`` (rows of the A
  tile at a constant stride: a full unfold); in the workload's types, or the
  intrinsic's ``packed_activations`` / ``packed_weights`` (AVX2 ``vpmaddwd``
  packs the activations as int16, so a matmul's are packed even unpadded);
* the **resources** (:class:`Resources`) the pruning rules read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import ceil, prod

from ...workloads import Conv2d, Loop, Matmul, Workload
from .intrinsics import OPERAND_BYTES, PACKED_BYTES, Intrinsic

ACCUMULATOR_BYTES = 4  # int32 / fp32

CONV_REDUCTIONS = ("rc", "ry", "rx")
CONV_ROWS = ("n", "y", "x")


def round_up(value: int, multiple: int) -> int:
    return ceil(value / multiple) * multiple


@dataclass(frozen=True)
class Candidate:
    """An intrinsic and one of its mappings of an operator: axis -> the loops fused onto it."""

    intrinsic: Intrinsic
    mapping: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def fused(self) -> dict[str, tuple[str, ...]]:
        return dict(self.mapping)

    @property
    def label(self) -> str:
        """e.g. ``vnni512 i<-f r<-rc+ry+rx``."""
        return f"{self.intrinsic.name} " + " ".join(f"{axis}<-{'+'.join(loops)}" for axis, loops in self.mapping)


@dataclass(frozen=True)
class Resources:
    """What one candidate's kernel needs (the pruning rules and the observations read these)."""

    utilisation: float  # useful share of the intrinsic's multiply-adds (the rest multiplies padding)
    vector_registers: int  # dot: vector registers one call needs
    tile_registers: int  # tile: AMX tile registers one call needs
    accumulator_bytes: int  # of one call
    panel_bytes: int  # operands one output tile of the intrinsic streams over the whole reduction
    packed_weight_bytes: int
    packed_activation_bytes: int  # 0: the kernel reads the activations in place
    duplication: float  # packed activations / activations (im2col-like unfolds exceed 1)

    def to_json(self) -> dict[str, float]:
        return dict(self.__dict__)


class MappedNest:
    """The mapped loop nest of a workload for one candidate (see the module docs)."""

    def __init__(self, workload: Workload, candidate: Candidate):
        if not isinstance(workload, (Conv2d, Matmul)):
            raise TypeError(f"mapping candidates are defined for conv2d and matmul, not {workload.op}")
        self.workload = workload
        self.candidate = candidate
        self.intrinsic = intrinsic = candidate.intrinsic
        fused = candidate.fused
        self.tile = intrinsic.shape == "tile"
        self.conv = isinstance(workload, Conv2d)
        self.bytes = OPERAND_BYTES[workload.dtype]
        # Bytes per element of the packed operands: the workload's, unless the intrinsic widens them in packing.
        self.activation_bytes = PACKED_BYTES.get(intrinsic.packed_activations, self.bytes)
        self.weight_bytes = PACKED_BYTES.get(intrinsic.packed_weights, self.bytes)
        extents = {lp.name: lp.extent for lp in workload.loops}
        self.extents = extents
        lane_loop = fused["i2" if self.tile else "i"]
        if len(lane_loop) != 1:
            raise ValueError(f"{candidate.label}: the lanes axis takes one loop, got {lane_loop}")
        self.lane_loop = lane_loop[0]
        self.fused_reduction: tuple[str, ...] = fused["r"]
        self.fused_rows: tuple[str, ...] = fused["i1"] if self.tile else ()
        wl = workload
        if self.conv:
            self.outer_reductions = tuple(r for r in CONV_REDUCTIONS if r not in self.fused_reduction)
            self.outer_spatial = tuple(s for s in CONV_ROWS if s not in self.fused_rows)
        else:
            self.outer_reductions = ()
            self.outer_spatial = () if self.tile else ("i",)
        self.lane_extent = extents[self.lane_loop]
        self.reduction_extent = prod(extents[r] for r in self.fused_reduction)
        self.rows_extent = prod(extents[r] for r in self.fused_rows) if self.tile else 1
        self.lanes_padded = round_up(self.lane_extent, intrinsic.lanes)
        self.reduction_padded = round_up(self.reduction_extent, intrinsic.depth)
        self.rows_padded = round_up(self.rows_extent, intrinsic.rows) if self.tile else 1
        if self.conv:
            self.Hp, self.Wp = wl.H + 2 * wl.padding, wl.W + 2 * wl.padding

    # -- loops left outside the intrinsic ---------------------------------------------------------
    @cached_property
    def names(self) -> dict[str, str]:
        """Role -> residual loop name: ``lanes``, ``rows`` (tile), ``reduction`` blocks."""
        if self.conv:
            return {"lanes": "f", "rows": "m", "reduction": "r"}
        return {"lanes": "j", "rows": "i", "reduction": "k"}

    @cached_property
    def spatial(self) -> tuple[Loop, ...]:
        """Residual spatial loops, in the accumulator's dimension order."""
        e = self.extents
        lanes = Loop(self.names["lanes"], self.lanes_padded // self.intrinsic.lanes, "spatial")
        if self.tile:
            rows = Loop(self.names["rows"], self.rows_padded // self.intrinsic.rows, "spatial")
            return (*(Loop(s, e[s], "spatial") for s in self.outer_spatial), rows, lanes)
        if self.conv:  # Acc[n, f, y, x, lanes]
            n, y, x = (Loop(s, e[s], "spatial") for s in CONV_ROWS)
            return (n, lanes, y, x)
        return (Loop("i", e["i"], "spatial"), lanes)

    @cached_property
    def reductions(self) -> tuple[Loop, ...]:
        """Residual reduction loops: the unfused ones (T), then the fused-reduction blocks."""
        e = self.extents
        blocks = Loop(self.names["reduction"], self.reduction_padded // self.intrinsic.depth, "reduction")
        return (*(Loop(r, e[r], "reduction") for r in self.outer_reductions), blocks)

    @property
    def loops(self) -> tuple[Loop, ...]:
        return (*self.spatial, *self.reductions)

    def effective_key(self) -> tuple:
        """The mapping with the loops of extent 1 that change nothing dropped: equal keys, the same kernel.

        A kernel row or column loop of extent 1 fused onto a dot product's ``r`` still changes the packed
        activations when the conv is strided or padded (they are then gathered at the output's pixels rather
        than copied whole), so it stays in the key.
        """
        def matters(loop: str) -> bool:
            if self.extents[loop] > 1:
                return True
            if self.conv and not self.tile and loop in ("ry", "rx"):
                return self.workload.stride > 1 or self.workload.padding > 0
            return False

        keep = [(axis, tuple(loop for loop in loops if matters(loop))) for axis, loops in self.candidate.mapping]
        return (self.intrinsic.name, tuple(keep))

    @property
    def fused_loop_count(self) -> int:
        return sum(len(loops) for _, loops in self.candidate.mapping)

    # -- layouts ---------------------------------------------------------------------------------------
    @cached_property
    def weight_shape(self) -> tuple[int, ...]:
        """The packed weights: ``[lanes blocks, *T, Rfp / group, lanes, group]``."""
        intr = self.intrinsic
        outer = tuple(self.extents[r] for r in self.outer_reductions)
        return (self.lanes_padded // intr.lanes, *outer, self.reduction_padded // intr.group, intr.lanes,
                intr.group)

    @cached_property
    def activation_shape(self) -> tuple[int, ...] | None:
        """The packed activations' shape; None when the kernel reads them in place (a matmul needing no padding
        nor widening)."""
        wl, e = self.workload, self.extents
        if not self.conv:
            rows = self.rows_padded if self.tile else wl.M
            if rows == wl.M and self.reduction_padded == wl.K and not self.intrinsic.packed_activations:
                return None
            return (rows, self.reduction_padded)
        if self.tile:
            outer = tuple(e[s] for s in self.outer_spatial) + tuple(e[r] for r in self.outer_reductions)
            return (*outer, self.rows_padded, self.reduction_padded)
        shape = [wl.N]
        if "rc" not in self.fused_reduction:
            shape.append(wl.C)
        shape.append(wl.OH if "ry" in self.fused_reduction else self.Hp)
        shape.append(wl.OW if "rx" in self.fused_reduction else self.Wp)
        return (*shape, self.reduction_padded)

    # -- resources ---------------------------------------------------------------------------------------
    @cached_property
    def resources(self) -> Resources:
        intr = self.intrinsic
        utilisation = (self.lane_extent / self.lanes_padded) * (self.reduction_extent / self.reduction_padded)
        if self.tile:
            utilisation *= self.rows_extent / self.rows_padded
        outer_reduction = prod(self.extents[r] for r in self.outer_reductions)
        reduction = outer_reduction * self.reduction_padded
        panel = (intr.lanes * self.weight_bytes + intr.rows * self.activation_bytes) * reduction
        data_elements = prod(self.workload.input_shapes[0])
        act_elements = prod(self.activation_shape) if self.activation_shape is not None else 0
        return Resources(
            utilisation=utilisation, vector_registers=intr.vector_registers, tile_registers=intr.tile_registers,
            accumulator_bytes=intr.rows * intr.lanes * ACCUMULATOR_BYTES, panel_bytes=panel,
            packed_weight_bytes=prod(self.weight_shape) * self.weight_bytes,
            packed_activation_bytes=act_elements * self.activation_bytes,
            # in elements: a widening copy duplicates nothing
            duplication=act_elements / data_elements if act_elements else 1.0,
        )

    def describe(self) -> str:
        """The fused loops per axis and the packings, in words."""
        intr = self.intrinsic
        parts = []
        for axis, loops in self.candidate.mapping:
            total = prod(self.extents[lp] for lp in loops)
            padded = {"i": self.lanes_padded, "i2": self.lanes_padded, "i1": self.rows_padded,
                      "r": self.reduction_padded}[axis]
            pad = f"->{padded}" if padded != total else ""
            parts.append(f"{axis}:{intr.extents[axis]} <- {'*'.join(loops)} ({total}{pad})")
        return ", ".join(parts)

    def packing(self) -> str:
        """The packed layouts, in words."""
        act = self.activation_shape
        weights = f"weights [{', '.join(map(str, self.weight_shape))}]"
        if act is None:
            return weights + ", activations read in place"
        if self.conv and not self.tile:
            kind = {("rc",): "NHWC", ("rc", "ry", "rx"): "im2col"}.get(
                self.fused_reduction, "unfold " + "+".join(self.fused_reduction))
        elif self.conv:
            kind = "row unfold"
        else:
            kind = "zero-padded"
        return weights + f", activations {kind} [{', '.join(map(str, act))}]"
