"""The ``microkernel`` space (seed 003): calibrated register microkernels inside divisible tiles.

* :mod:`.catalogue`: what a microkernel catalogue is (pure data, stored per CPU fingerprint);
* :mod:`.calibration`: measuring one on this machine (a client of :mod:`tensorgym.measure`);
* :mod:`.space`: the search space over a catalogue;
* :mod:`.codegen`: the TIR the space's kernels are generated as, and the packed layouts.
"""

from .calibration import CalibrationResult, calibrate
from .catalogue import (
    DEFAULT_THRESHOLD, Catalogue, CatalogueEntry, CatalogueMissing, EnumerationRules, Microkernel, catalogue_path,
    default_cache_dir, enumerate_microkernels, load_catalogue,
)
from .codegen import LAMBDA, pack_conv2d, unpack_conv2d
from .space import MicrokernelSpace, Selection

__all__ = [
    "DEFAULT_THRESHOLD", "LAMBDA", "CalibrationResult", "Catalogue", "CatalogueEntry", "CatalogueMissing",
    "EnumerationRules", "Microkernel", "MicrokernelSpace", "Selection", "calibrate", "catalogue_path",
    "default_cache_dir", "enumerate_microkernels", "load_catalogue", "pack_conv2d", "unpack_conv2d",
]
