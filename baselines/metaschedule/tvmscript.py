"""A cheap ``inspect.stack`` for TVMScript, so that MetaSchedule's processes start in seconds.

The first import of ``tvm.s_tir.tensor_intrin`` (which ``TuneContext``
triggers) takes 20-30 s, because each of its ~500 TVMScript functions calls
``inspect.stack()``, which resolves the module of every frame of the stack.
The TVMScript parser only reads the frame objects and the source line of the
first few frames, so :func:`install_fast_tvmscript_stack` gives it a stack
without module resolution (3 s instead of 30 s). It is installed in the
MetaSchedule process, in its builder/runner popen workers (``initializer=``),
and in tensorgym's build workers before they regenerate a design space.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import types
from typing import Any


def _stack_without_modules(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack()`` minus its per-frame module lookup: source lines only for the innermost frames."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        lines = [linecache.getline(code.co_filename, frame.f_lineno)] if len(frames) < 4 else None
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, lines,
                                        0 if lines else None))
        frame = frame.f_back
    return frames


class _InspectForTVMScript(types.ModuleType):
    """The ``inspect`` module as the TVMScript parser sees it: everything as usual but ``stack``."""

    def __init__(self) -> None:
        super().__init__("inspect")
        self.stack = _stack_without_modules

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)


def install_fast_tvmscript_stack() -> None:
    """Make TVMScript's ``@T.prim_func`` cheap to define in this process (idempotent; imports TVM)."""
    import tvm.tirx.script.parser.entry as entry

    if not isinstance(entry.inspect, _InspectForTVMScript):
        entry.inspect = _InspectForTVMScript()


def popen_initializer() -> None:
    """``initializer=`` of MetaSchedule's LocalBuilder/LocalRunner: their popen workers import TVM anew."""
    install_fast_tvmscript_stack()
