"""What every benchmark report starts with, and where it goes: the command, the commit, the CPU and the date."""

from __future__ import annotations

import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tensorgym.target import Target

HERE = Path(__file__).resolve().parent


def header(title: str, target: Target) -> list[str]:
    """The first lines of a report: its title, the exact command, the commit (and whether the tree had uncommitted
    changes), the CPU the figures come from, and the date."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE).stdout.strip()

    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    script = Path(sys.argv[0]).resolve()
    command = script.relative_to(HERE.parent) if script.is_relative_to(HERE.parent) else script
    return [f"# {title}", f"command: python {shlex.join([str(command), *sys.argv[1:]])}",
            f"commit: {git('rev-parse', '--short', 'HEAD')}{dirty}; CPU: {target.label} ({platform.machine()}); "
            f"fingerprint {target.fingerprint}",
            f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]


def emit(report: str, out: str | Path | None) -> None:
    """Print the report, and write it to ``out`` too when given."""
    print(report)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(report)
