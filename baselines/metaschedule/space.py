"""The ``metaschedule`` space: one config per (design space, knob values) of MetaSchedule's design spaces.

To store MetaSchedule's schedules as tensorgym records they need configs:
``{"space": 1, "k00_tile": [4, 1, 8, 2], ..., "k03_par": 32, "k04_cat": 2,
"k05_loc": -1}`` (see :mod:`.design` for the knobs). The space's builder
(:class:`~.builder.MetaScheduleBuilder`) replays that design space's trace with
those values and runs MetaSchedule's postprocessors.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.factors import count_factorizations, nth_factorization
from tensorgym.spaces.base import Space, SpaceError
from tensorgym.target import Target
from tensorgym.workloads import Workload

from .builder import MetaScheduleBuilder
from .design import Signature, design_signature

_ROOT_LOCATIONS = (-2, -1)  # compute inline / at the root: valid whatever the tiles


class MetaScheduleSpace(Space):
    """MetaSchedule's design spaces of a workload as a tensorgym space (see the module docs).

    Args:
        workload, target: as for every space (LLVM CPU targets).
        signature: the design spaces' knobs; computed in a subprocess on first
            use when omitted (MetaSchedule's tuning job returns it).

    The space's builder regenerates the design spaces lazily in the process that
    builds (once per process) and refuses to apply configs if they no longer
    have the signature the configs were made for. :meth:`neighbours`
    is not offered: MetaSchedule's own neighbourhood is its mutators', which
    need the design space's TVM objects, so agents that hop do so in the
    ``tiles`` space.
    """

    name = "metaschedule"
    builder_class = MetaScheduleBuilder
    supported_dtypes = ("float32", "int8", "bf16")

    def __init__(self, workload: Workload, target: Target, signature: Signature | None = None):
        super().__init__(workload, target)
        if target.kind != "llvm":
            raise SpaceError(f"the metaschedule space is implemented for LLVM CPUs; got target kind {target.kind!r}")
        self._signature = signature

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "signature": self.signature}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], state["signature"])

    @property
    def signature(self) -> Signature:
        if self._signature is None:
            self._signature = design_signature(self.workload, self.target)
        return self._signature

    # -- validity ------------------------------------------------------------
    def check(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise SpaceError(f"expected a Config, got {type(config).__name__}")
        spaces = self.signature
        index = config.get("space")
        if not isinstance(index, int) or not 0 <= index < len(spaces):
            raise SpaceError(f"knob 'space' must be a design-space index in [0, {len(spaces)}), got {index!r}")
        knobs = spaces[index]
        expected = {"space", *(k.name for k in knobs)}
        if set(config) != expected:
            raise SpaceError(f"design space {index} of {self.workload.label} has knobs {sorted(expected)}; "
                             f"got {sorted(config)}")
        for knob in knobs:
            value = config[knob.name]
            if knob.kind == "tile":
                if (not isinstance(value, tuple) or len(value) != knob.parts or min(value) < 1
                        or prod(value) != knob.product or value[-1] > knob.max_innermost):
                    raise SpaceError(f"{knob.name} must be {knob.parts} positive factors of {knob.product}, the "
                                     f"last <= {knob.max_innermost}; got {value!r}")
            elif not isinstance(value, int):
                raise SpaceError(f"{knob.name} must be an int, got {value!r}")
            elif knob.kind == "cat" and not 0 <= value < len(knob.choices):
                raise SpaceError(f"{knob.name} is an index into {list(knob.choices)}, got {value}")
            elif knob.kind == "loc" and value < -2:
                raise SpaceError(f"{knob.name} is a compute location >= -2, got {value}")
            elif knob.kind == "par" and value < 1:
                raise SpaceError(f"{knob.name} is a positive parallel extent, got {value}")

    # -- sampling --------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        """A random config: uniform design space, tile factorisations and categorical choices.

        Compute locations are drawn from inline/root only: which loops are
        valid locations depends on the tiles and is known only by replaying
        the trace. The parallel extent keeps the design space's value.
        """
        index = int(rng.integers(len(self.signature)))
        values: dict[str, Any] = {"space": index}
        for knob in self.signature[index]:
            if knob.kind == "tile":
                count = count_factorizations(knob.product, knob.parts, knob.max_innermost)
                values[knob.name] = nth_factorization(knob.product, knob.parts, knob.max_innermost,
                                                      int(rng.integers(count)))
            elif knob.kind == "cat":
                values[knob.name] = int(rng.integers(len(knob.choices)))
            elif knob.kind == "loc":
                values[knob.name] = _ROOT_LOCATIONS[int(rng.integers(len(_ROOT_LOCATIONS)))]
            else:
                values[knob.name] = knob.default
        return Config(values)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        raise NotImplementedError("the metaschedule space has no hop neighbourhood (MetaSchedule's mutators are "
                                  "its neighbourhood); hop in the tiles space instead")

    # -- encoding ----------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return 1 + max(sum(k.parts if k.kind == "tile" else 1 for k in knobs) for knobs in self.signature)

    def encode(self, config: Config) -> np.ndarray:
        """Design-space index, then per knob: log-tile shares, categorical index, location, parallel extent."""
        self.check(config)
        out = np.zeros(self.encoding_size, dtype=np.float32)
        index = int(config["space"])
        out[0] = index / max(1, len(self.signature) - 1)
        i = 1
        for knob in self.signature[index]:
            value = config[knob.name]
            if knob.kind == "tile":
                scale = np.log2(knob.product) if knob.product > 1 else 1.0
                out[i:i + knob.parts] = np.log2(np.asarray(value, dtype=np.float64)) / scale
                i += knob.parts
                continue
            if knob.kind == "cat":
                out[i] = value / max(1, len(knob.choices) - 1)
            elif knob.kind == "loc":
                out[i] = min(1.0, (value + 2) / 32)
            else:
                out[i] = min(1.0, np.log2(value) / (2 * np.log2(max(2, knob.default))))
            i += 1
        return out

    def describe(self, config: Config) -> str:
        parts = [f"space={config['space']}"]
        for knob in self.signature[int(config["space"])]:
            value = config[knob.name]
            if knob.kind == "tile":
                parts.append(f"{knob.name}={'x'.join(map(str, value))}")
            elif knob.kind == "cat":
                parts.append(f"{knob.name}={knob.choices[value]}")
            else:
                parts.append(f"{knob.name}={value}")
        return " ".join(parts)
