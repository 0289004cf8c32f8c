"""The ``mapping`` space (seed 002, GTA): hardware intrinsics, the mappings of a workload's loops onto them, tiles.

* :mod:`.intrinsics`: the registry of intrinsics (AMX, VNNI, pmaddubsw, AVX512-BF16, FP32 FMA; on AVX2
  ``vpmaddwd`` and the 256-bit FMA, for fp32 and widened bf16), as data;
* :mod:`.tir`: their TIR descriptions and implementations, registered with TVM under tensorgym's names;
* :mod:`.enumeration`: the symbolic enumeration of mapping candidates (GTA / AMOS);
* :mod:`.nest`: the loop nest, layouts and resources a candidate makes of a workload;
* :mod:`.pruning`: which candidates are kept, masked or pruned, and by which rule;
* :mod:`.kernels`: the tensorized TE computation and schedule of a candidate;
* :mod:`.packing`: host-side weight packing for pre-packed kernels;
* :mod:`.features`: cost-model and observation features;
* :mod:`.space`: the space (the search geometry);
* :mod:`.builder`: how its configs become kernels (what the measurer receives).
"""

from .intrinsics import INTRINSICS, Intrinsic, intrinsics_for
from .nest import Candidate, MappedNest, Resources
from .pruning import MIN_UTILISATION, RULES, Verdict
from .space import MappingSpace

__all__ = ["INTRINSICS", "MIN_UTILISATION", "RULES", "Candidate", "Intrinsic", "MappedNest", "MappingSpace",
           "Resources", "Verdict", "intrinsics_for"]
