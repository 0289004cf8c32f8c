"""Host-side packing of the weights into a mapped nest's layout (NumPy; for spaces made with ``prepacked=True``).

The layout is the one the kernels' in-kernel ``W_pack`` stage computes
(:mod:`.kernels`): ``[lanes blocks, *T, Rfp / group, lanes, group]``, zero
where the output channels or the fused reduction are padded, in the
intrinsic's ``packed_weights`` type where it has one.
"""

from __future__ import annotations

import numpy as np

from .nest import MappedNest


def pack_weights(nest: MappedNest, weights: np.ndarray) -> np.ndarray:
    """The weights (conv OIHW, matmul ``B[K, N]``) in the nest's packed layout."""
    intr = nest.intrinsic
    e = nest.extents
    if nest.conv:
        position = {"rc": 1, "ry": 2, "rx": 3}
        outer = nest.outer_reductions
        # [F, *T, *S] -> [F, *T, Rf]
        arranged = weights.transpose([0] + [position[r] for r in outer] + [position[r] for r in nest.fused_reduction])
        outer_shape = [e[r] for r in outer]
        arranged = arranged.reshape([weights.shape[0], *outer_shape, nest.reduction_extent])
    else:
        outer_shape = []
        arranged = weights.T  # [N, K]
    padded = np.zeros([nest.lanes_padded, *outer_shape, nest.reduction_padded], dtype=weights.dtype)
    padded[(slice(0, nest.lane_extent),) + (slice(None),) * len(outer_shape) + (slice(0, nest.reduction_extent),)] = \
        arranged
    blocked = padded.reshape([nest.lanes_padded // intr.lanes, intr.lanes, *outer_shape,
                              nest.reduction_padded // intr.group, intr.group])
    k = len(outer_shape)
    order = [0, *range(2, 2 + k), 2 + k, 1, 3 + k]
    packed = np.ascontiguousarray(blocked.transpose(order))
    # widened as the kernel's own packing widens them (int8 -> int16 for vpmaddwd)
    return packed.astype(intr.packed_weights) if intr.packed_weights else packed
