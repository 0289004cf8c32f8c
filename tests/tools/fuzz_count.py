"""Count what fuzzed calls to tensorgym's public entry points raise, by exception type.

    python tests/tools/fuzz_count.py [--examples 300] [--targets config,space,...] [--limit 30]

Runs every target of ``tests/fuzzing.py`` on the same derandomized inputs (so
two versions of the code can be compared: put the other version first on
``PYTHONPATH``) and prints, per target, how many calls succeeded, raised each
exception type, or hung; how many of the failures were undocumented (not a
TensorgymError; for the command line: not a one-line error with exit code 2);
and how many failing calls left a file behind. It asserts nothing: the
property-based tests in ``tests/test_fuzz.py`` do.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fakes, fuzzing

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzzing  # noqa: E402


def count(name: str, examples: int, limit: float) -> tuple[Counter, Counter, int, list[str]]:
    kinds: Counter = Counter()
    undocumented: Counter = Counter()
    left_files = 0
    samples: list[str] = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        nonlocal left_files
        outcome = fuzzing.run_isolated(fuzzing.TARGETS[name], data, limit=limit, cli=name == "cli")
        kinds[outcome.kind] += 1
        if not outcome.documented:
            undocumented[outcome.kind] += 1
            if len(samples) < 5 or outcome.kind == "hang":
                samples.append(f"{outcome.kind}: {outcome.message[:160]!r}\n         from {outcome.call[:300]}")
        if outcome.new_files:
            left_files += 1

    run()
    return kinds, undocumented, left_files, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="calls per target (default: 300)")
    parser.add_argument("--targets", default=",".join(fuzzing.TARGETS), help="comma-separated targets")
    parser.add_argument("--limit", type=float, default=30.0, help="seconds before a call counts as a hang")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    import tensorgym

    print(f"tensorgym from {Path(tensorgym.__file__).parent}")
    totals: Counter = Counter()
    bad_total = files_total = calls = 0
    for name in args.targets.split(","):
        t0 = time.monotonic()
        kinds, undocumented, left, samples = count(name, args.examples, args.limit)
        n = sum(kinds.values())
        calls += n
        totals.update(kinds)
        bad_total += sum(undocumented.values())
        files_total += left
        print(f"\n== {name}: {n} calls in {time.monotonic() - t0:.0f} s; undocumented {sum(undocumented.values())}, "
              f"hangs {kinds['hang']}, failing calls that left files {left}")
        print("   " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
        if undocumented:
            print("   undocumented: " + ", ".join(f"{k} {v}" for k, v in undocumented.most_common()))
        for line in samples:
            print(f"     e.g. {line}")
    print(f"\nTOTAL {calls} calls: undocumented errors {bad_total}, hangs {totals['hang']}, "
          f"failing calls that left files {files_total}")
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in totals.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
