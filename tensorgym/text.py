"""Text helpers: plain-text tables for the command line and the benchmarks, file-name slugs."""

from __future__ import annotations

import re
from collections.abc import Sequence


def format_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """``rows`` under ``header`` in left-aligned columns, a dashed rule below the header (None: blank)."""
    cells = [[str(c) for c in header]] + [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def slug(text: str) -> str:
    """``text`` as a file name: runs of anything but letters, digits, ``.``, ``_``, ``-`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")
