"""How the ``metaschedule`` space's configs become kernels: MetaSchedule's traces replayed with the config's values.

:class:`MetaScheduleBuilder` regenerates the workload's design spaces in the process
that builds (once per process, :func:`.design.design`), refuses a config whose design
spaces no longer have the signature the space was made with, and replays the
config's design space with its knob values and MetaSchedule's postprocessors. For
int8 and bf16, MetaSchedule's kernels take blocked layouts: the arguments are packed
and the output unpacked outside the timed region (:mod:`.packed`).
"""

from __future__ import annotations

from tensorgym.config import Config
from tensorgym.spaces.base import SpaceError
from tensorgym.spaces.builder import KernelBuilder

from . import packed
from .design import design as cached_design
from .design import signature_digest


class MetaScheduleBuilder(KernelBuilder):
    """Builds the configs of a :class:`~.space.MetaScheduleSpace` (see the module docs)."""

    def kernel_arguments(self, config: Config, inputs):
        if not packed.is_packed(self.workload):
            return super().kernel_arguments(config, inputs)
        return packed.kernel_arguments(self.workload, inputs)

    def canonical_output(self, config: Config, arguments):
        if not packed.is_packed(self.workload):
            return arguments[-1]
        return packed.canonical_output(self.workload, arguments[-1])

    def apply(self, config: Config):
        space = self.space
        space.check(config)
        design = cached_design(self.workload, self.target)
        if design.digest != signature_digest(space.signature):
            raise SpaceError("MetaSchedule's design spaces in this process differ from those this space was made "
                             "with (another TVM version or target?)")
        return design.schedule(config).mod
