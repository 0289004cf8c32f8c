"""Name registries whose entries may be imported on first use.

Some registered classes live in modules that import the package that registers them (the
MetaSchedule peer imports the agents and the measurer); registering them as ``"module:Class"``
strings breaks the import cycle, and :func:`lookup` imports them when they are asked for.
"""

from __future__ import annotations

import importlib
from typing import Any


def lookup(registry: dict[str, Any], name: str, kind: str, error: type[Exception] = ValueError) -> Any:
    """``registry[name]``; a ``"module:Class"`` entry is imported (Python caches the module)."""
    try:
        entry = registry[name]
    except KeyError:
        raise error(f"unknown {kind} {name!r}; available: {', '.join(sorted(registry))}") from None
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry
