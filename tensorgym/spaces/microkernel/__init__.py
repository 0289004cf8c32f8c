"""The ``microkernel`` space (seed 003): calibrated register microkernels inside divisible tiles.

* :mod:`.catalogue`: what a microkernel catalogue is (pure data, stored per CPU fingerprint);
* :mod:`.space`: the search space over a catalogue (it loads one; it never measures);
* :mod:`.builder`: how the space's configs become kernels (the plan, its TIR, the packed arguments);
* :mod:`.codegen`: the TIR the space's kernels are generated as, and the packed layouts.

Measuring a catalogue on this machine (the FMA peak, every candidate microkernel) is a
measuring job above the spaces: :mod:`tensorgym.calibration`.
"""

from .builder import MicrokernelBuilder
from .catalogue import (
    DEFAULT_THRESHOLD, Catalogue, CatalogueEntry, CatalogueMissing, EnumerationRules, Microkernel, catalogue_path,
    default_cache_dir, enumerate_microkernels, load_catalogue,
)
from .codegen import LAMBDA, pack_conv2d, unpack_conv2d
from .space import MicrokernelSpace, Selection

__all__ = [
    "DEFAULT_THRESHOLD", "LAMBDA", "Catalogue", "CatalogueEntry", "CatalogueMissing", "EnumerationRules",
    "Microkernel", "MicrokernelBuilder", "MicrokernelSpace", "Selection", "catalogue_path", "default_cache_dir",
    "enumerate_microkernels", "load_catalogue", "pack_conv2d", "unpack_conv2d",
]
