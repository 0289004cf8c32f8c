"""Landscapes: exhaustively measured benchmark spaces, shipped as data, and the backend that answers from them.

* :mod:`.file`: the :class:`Landscape` value and its compact ``*.json.gz`` file format;
* :mod:`.export`: a database's records of a space -> a :class:`Landscape`; the T4 format;
* :mod:`.evaluator`: :class:`LandscapeEvaluator`, the ``landscape`` backend (no TVM, recorded noise,
  the live pipeline's clock);
* :mod:`.shipped`: where shipped landscapes live (one folder per CPU) and which is this machine's;
* :mod:`.measuring`: measuring every config of a benchmark space (the job that makes a landscape).

Importing this package imports neither TVM nor the measurer's workers.
"""

from .evaluator import LandscapeEvaluator
from .export import LandscapeIncomplete, export_landscape, write_t4
from .file import Landscape, LandscapeError, LandscapeMetadata, NotInLandscape
from .shipped import (AnotherCPULandscape, LandscapeNotFound, another_cpu_notice, cpu_folder, find_landscape,
                      shipped_env_ids, shipped_landscapes, warn_if_another_cpu)

__all__ = ["AnotherCPULandscape", "Landscape", "LandscapeError", "LandscapeEvaluator", "LandscapeIncomplete",
           "LandscapeMetadata", "LandscapeNotFound", "NotInLandscape", "another_cpu_notice", "cpu_folder",
           "export_landscape", "find_landscape", "shipped_env_ids", "shipped_landscapes", "warn_if_another_cpu",
           "write_t4"]
