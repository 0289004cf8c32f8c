"""Is a landscape as hard as the space a user tunes? Its difficulty profile beside its full-space sample's.

For each landscape of this CPU that has a full-space sample (``tensorgym landscape sample``: 2,000
configs drawn uniformly from the layer's whole tiles space, measured live on the same CPU): random
search's expected best after 16, 64 and 256 draws as a share of the best known kernel, on the
landscape (against its optimum) and in the whole space (against the best of the sample and the
landscape), with the sample's own standard error, the values thinning dropped, and the shares of configs
within 5 % of that best. The criterion: the two profiles agree within 0.05 at each N
(:mod:`tensorgym.baselines.fidelity`).

Reads files only (nothing is measured)::

    python bench/bench_landscape_fidelity.py --out bench/reports/landscapes/fidelity.txt
    python bench/bench_landscape_fidelity.py --landscape work/R5-stratified.json.gz   # a file not shipped

A candidate space can be rated before it is measured whole: measure a part (``landscape measure --limit 400``),
export it (``landscape export --partial``) and rate that file: its shares carry their standard error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from tensorgym.baselines.fidelity import DRAWS, TOLERANCE, landscape_fidelity, random_search_profile
from tensorgym.landscape import Landscape, cpu_folder, shipped_landscapes
from tensorgym.landscape.shipped import sample_path
from tensorgym.target import resolve_target
from tensorgym.text import format_table

from report_header import emit, header


RESAMPLES = 200


def sample_error(sample: Landscape, best_known: float) -> np.ndarray:
    """The bootstrap standard error of a sample's profile (shares of ``best_known`` at each of DRAWS): of the
    full-space sample's, or of a partial landscape's, whose measured part is a uniform sample of its space."""
    scores, rng = np.asarray(sample.scores, dtype=float), np.random.default_rng(0)
    return np.std([random_search_profile(rng.choice(scores, scores.size), best_known) for _ in range(RESAMPLES)],
                  axis=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default=None, help="the CPU folder (default: this CPU's)")
    parser.add_argument("--landscape", action="append", default=[], metavar="FILE",
                        help="also rate this landscape file against its layer's sample (repeatable)")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    cpu = args.cpu or cpu_folder()
    candidates = [(f"shipped {s.layer}", s.path, s.sample)
                  for s in shipped_landscapes() if s.cpu == cpu and s.space == "tiles"]
    for path in args.landscape:
        land = Landscape.load(path)
        candidates.append((Path(path).name, Path(path), sample_path(land.workload, cpu=land.cpu_folder)))
    rows, notes, partial = [], [], False
    for name, path, sample_file in candidates:
        if not sample_file.is_file():
            notes.append(f"{name}: no full-space sample on {cpu} ({sample_file.name}); not rated")
            continue
        land, sample = Landscape.load(path), Landscape.load(sample_file)
        f = landscape_fidelity(land, sample)
        thinned = ", ".join((land.metadata.notes or {}).get("thinned", [])) or "-"
        configs = str(len(land)) if land.complete else f"{len(land)} of {land.metadata.configs_in_space}"
        shares = " / ".join(f"{v:.2f}" for v in f.landscape)
        if not land.complete:
            partial = True
            shares += " +- " + " / ".join(f"{v:.3f}" for v in sample_error(land, f.landscape_optimum))
        rows.append((name, land.workload_label, configs, thinned, shares,
                     str(len(sample)), " / ".join(f"{v:.2f}" for v in f.sample),
                     " / ".join(f"{v:.3f}" for v in sample_error(sample, f.best_known)), f"{f.gap:.3f}",
                     "yes" if f.representative else "no", f"{100 * f.near_optimal_landscape:.1f} %",
                     f"{100 * f.near_optimal_sample:.1f} %", f"{f.landscape_optimum:.1f}", f"{f.sample_best:.1f}"))
    draws = "/".join(map(str, DRAWS))
    lines = header("Landscape fidelity: random search's profile on each landscape and in the whole tiles space",
                   resolve_target(None))
    lines += ["", format_table(rows, ("landscape", "layer", "configs", "thinned", f"landscape @{draws}", "sample",
                                      f"whole space @{draws}", "its s.e.", "gap", f"within {TOLERANCE}",
                                      "near-opt land.", "near-opt space", "land. best", "sample best")), "",
              f"@{draws}: random search's expected best of that many uniform draws, as a share of the landscape's "
              f"optimum (landscape) or of the best known, the max of the sample's and the landscape's best (whole "
              f"space). its s.e.: the whole space's shares' standard error, over {RESAMPLES} bootstrap resamples of "
              f"the sample. thinned: values dropped from the stratified space to bring it within {TOLERANCE} "
              f"(`tensorgym landscape thin`). near-opt: configs within 5 % of that best. Bests in GFLOP/s, each as "
              f"measured (not re-timed together).",
              *([] if not partial else [
                  "N of M configs: a partial landscape, measured so far in its shuffled order, rated as an estimate "
                  "of the whole (its optimum: the best of what is measured and of its anchor search; +-: the "
                  "standard error of its shares, bootstrap over what is measured)."]), *notes]
    emit("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
