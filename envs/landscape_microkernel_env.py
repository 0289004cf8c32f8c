"""The microkernel construction env over a landscape (``backend="landscape"``, ``space="microkernel"``).

A microkernel landscape (:mod:`tensorgym.landscape`) is every config of a benchmark sub-space of one
conv2d layer's microkernel space (:mod:`tensorgym.spaces.microkernel.benchmark`), measured once on one
CPU::

    gym.make("Conv2d-ResNet-R5-v0", space="microkernel", backend="landscape")        # this CPU's shipped one
    gym.make("Conv2d-ResNet-R5-v0", space="microkernel", backend="landscape",
             landscape="R5-microkernel.json.gz")                                      # a file

``landscape=`` is read as by the tile-hop env's landscape backend (:mod:`.landscape_env`: None, a CPU folder,
a file or a :class:`~tensorgym.landscape.Landscape`; another CPU's only when named).

**The env.** Phases, actions, observations and rewards are the microkernel env's
(:mod:`.microkernel_env`), over the landscape's sub-space: the masks offer only the actions that lead
to a config of the sub-space (the full construction's masks, cut to the paths of the sub-space's configs,
held as a prefix tree), so every episode ends on a config the landscape holds, and its reward is that
config's throughput as a fraction of the peak the landscape's catalogue measured, drawn (seeded) from its
recorded samples by the :class:`~tensorgym.landscape.LandscapeEvaluator`. ``reset(seed=s)`` seeds the draws
as the tile-hop landscape env does. Nothing is compiled or timed, no catalogue is calibrated or loaded from
this machine (the landscape carries its own), and TVM is not imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgym.config import Config
from tensorgym.landscape import LandscapeEvaluator
from tensorgym.spaces.microkernel import LAMBDA
from tensorgym.target import Target
from tensorgym.workloads import Workload

from .base import check_reset_options
from .landscape_env import DRAW_STREAM, LandscapeArgument, landscape_evaluator
from .microkernel_env import MicrokernelEnv

SPACE = "microkernel"

Trie = dict[int, "Trie"]  # choice within the phase's segment -> what may follow


class LandscapeMicrokernelEnv(MicrokernelEnv):
    """The microkernel env answered from a landscape (see the module docs); ``gym.make(id, space="microkernel",
    backend="landscape")`` and ``make_env(workload, space="microkernel", backend="landscape")`` build one.

    Keyword arguments: ``landscape`` (which landscape) or ``evaluator`` (a
    :class:`~tensorgym.landscape.LandscapeEvaluator`), ``target`` (the CPU whose shipped landscape is used),
    ``max_steps``, ``render_mode``. No ``context``, ``db``, ``measurer`` or space options: the landscape is the
    space and the measurements.
    """

    landscape_backend = True

    def __init__(self, workload: Workload, *, landscape: LandscapeArgument = None,
                 evaluator: LandscapeEvaluator | None = None, target: Target | str | None = None,
                 backend: str = "landscape", **kwargs: Any):
        evaluator = landscape_evaluator("LandscapeMicrokernelEnv", workload, SPACE, landscape=landscape,
                                        evaluator=evaluator, target=target, backend=backend, kwargs=kwargs,
                                        ignored=("auto_calibrate",))
        # The microkernel env's own set-up; with an evaluator it needs no catalogue (the landscape's space has one).
        super().__init__(workload, backend="landscape", evaluator=evaluator, **kwargs)
        self.landscape = evaluator.landscape
        self._trie = construction_trie(self, self.landscape.configs)
        self._node: Trie = self._trie

    # -- the construction, cut to the landscape ------------------------------------------------------------
    def begin(self) -> None:
        super().begin()
        self._node = self._trie

    def take(self, action: int) -> None:
        self._node = self._node.get(action - self.segments[self._phase].start, {})
        super().take(action)

    def _valid_choices(self) -> list[int]:
        return sorted(self._node)

    # -- the draws --------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        check_reset_options(options, ())
        if seed is not None:
            self._seed_draws(seed)
        return super().reset(seed=seed, options=options)

    def reseed(self, seed: int) -> None:
        """Seed the env's randomness and the evaluator's draws as ``reset(seed=seed)`` does, without an episode."""
        super().reseed(seed)
        self._seed_draws(seed)

    def _seed_draws(self, seed: int) -> None:
        self.evaluator.seed(np.random.default_rng([int(seed), DRAW_STREAM]))

    def recorded_configs(self) -> list[Config]:
        """The landscape's configs whose kernels ran correctly."""
        return [c for c, ok in zip(self.landscape.configs, self.landscape.ok) if ok]

    def render(self) -> str | None:
        text = super().render()
        return None if text is None else f"{text}  [landscape {self.landscape.cpu_folder}]"


def construction_trie(env: MicrokernelEnv, configs) -> Trie:
    """The prefix tree of the construction's choices (each within its phase's segment) that build ``configs``."""
    space = env.search_space
    root: Trie = {}
    for config in configs:
        selection = space.selection_of(config)
        path = [env._kernel_index[selection.kernel]]
        if selection.combo is None:
            path.append(0)
        else:
            _, a, h2, b = selection.combo
            path += [h2, a - 1, b - 1]
        path.append(env.reuse_choices.index(config["reuse"]))
        path += [env._tile_index[(LAMBDA, 1) if dim == LAMBDA else (dim, trips)]
                 for dim, trips in space.stack_of(config)]
        path.append(config["parallel"])
        node = root
        for choice in path:
            node = node.setdefault(choice, {})
    return root
