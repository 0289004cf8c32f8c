"""``tensorgym landscape measure|sample|export|thin|list|check``: exhaustively measured benchmark spaces.

  tensorgym landscape measure ENV_ID --db PATH [--space tiles|microkernel] [--rounds N] [--limit N] [--time-limit S]
        measure every config of the layer's benchmark space (tensorgym.spaces.tiles.benchmark, or for a
        conv2d tensorgym.spaces.microkernel.benchmark) through the normal evaluator, after the full-space
        search that anchors it (the GA in the tiles space, random-structured in the microkernel space, 512
        measurements, into the --anchor-db); resumable (run it again), with a progress bar and an ETA;
        --rounds N measures every config N times, a round at a time, each round into its own database
        (each config is built once, in round 1, and its kernel timed again in the later rounds)
  tensorgym landscape sample ENV_ID --db PATH [--configs 2000] [--limit N] [--time-limit S]
        measure a uniform random sample of the layer's whole tiles space through the normal evaluator
        (resumable): how hard the space a user tunes is, the live random baseline, and a held-out test set
  tensorgym landscape export ENV_ID --db PATH [--space ...] [--out FILE] [--t4 FILE] [--kernel-tuner FILE]
  tensorgym landscape export ENV_ID|FILE [--landscape CPU] --t4 FILE | --kernel-tuner FILE
        one compact file of the landscape from its measurements (--db), or a landscape file or shipped
        landscape as it is; --t4 also writes the T4 format read by the autotuning-methodology package,
        --kernel-tuner Kernel Tuner's cache file, which its simulation mode replays
  tensorgym landscape thin ENV_ID|FILE [--landscape CPU] [--sample FILE] [--out FILE]
        drop values from a tiles landscape's coordinates until random search's profile on it is within the
        tolerance of its full-space sample's (nothing measured: a narrower space of the same measurements)
  tensorgym landscape list
        every shipped and locally exported landscape: its CPU, space, configs, optimum, and its fidelity
        (random search's profile on it beside the full-space sample's, where one is measured)
  tensorgym landscape check ENV_ID [--space ...] [--configs 64] [--rounds N]
        re-measure random configs of the shipped landscape live: their rank correlation with it
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from tensorgym.baselines.fidelity import TOLERANCE, landscape_fidelity, random_search_profile, thinned_bounds
from tensorgym.catalog import make_agent, make_space
from tensorgym.database import Database
from tensorgym.evaluator import Evaluator
from tensorgym.envs.registration import workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.landscape.check import check_landscape
from tensorgym.landscape.export import export_landscape, export_sample, write_kernel_tuner_cache, write_t4
from tensorgym.landscape.parameters import free_parameters
from tensorgym.landscape.file import Landscape
from tensorgym.landscape.measuring import measure_configs, measure_rounds, round_path, sample_order
from tensorgym.landscape.shipped import (LANDSCAPE_SPACES as SPACES, LANDSCAPES_DIR, SUFFIX, cpu_folder,
                                        find_landscape, landscape_filename, sample_path, shipped_landscapes)
from tensorgym.measure.measurer import Measurer
from tensorgym.spaces.microkernel.catalogue import load_catalogue
from tensorgym.spaces.microkernel import benchmark as microkernel_benchmark
from tensorgym.spaces.tiles import benchmark as tiles_benchmark
from tensorgym.target import RUNNABLE_PROFILES, resolve_target
from tensorgym.text import format_table
from tensorgym.tuner import ProgressBarCallback, Tuner
from tensorgym.workloads import Conv2d

from .args import finite_float

# The full-space search whose best config anchors each space's benchmark sub-space (see their modules).
ANCHOR_AGENTS = {"tiles": "ga", "microkernel": "random-structured"}
DEFAULT_MAX_CONFIGS = {"tiles": tiles_benchmark.DEFAULT_MAX_CONFIGS,
                       "microkernel": microkernel_benchmark.DEFAULT_MAX_CONFIGS}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("landscape", help="measure, export or check an exhaustively measured space")
    sub = parser.add_subparsers(dest="landscape_command", required=True)

    p = sub.add_parser("measure", help="measure every config of a layer's benchmark space (resumable)",
                       description="Measure every config of the layer's benchmark space: a bounded sub-space of "
                                   "the tiles space (or, --space microkernel, of a conv2d's microkernel space) chosen "
                                   "by documented rules (tensorgym.spaces.tiles.benchmark, "
                                   "tensorgym.spaces.microkernel.benchmark). "
                                   "Every kernel is checked against NumPy and faults are recorded. Run the same "
                                   "command again to resume.")
    _add_common(p)
    _add_chunks(p)
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("sample", help="measure a uniform random sample of a layer's whole tiles space (resumable)",
                       description="Measure configs drawn uniformly from the layer's whole tiles space (not the "
                                   "benchmark sub-space) through the normal evaluator: the full space's difficulty "
                                   "profile that a landscape is checked against, the live random baseline, and a "
                                   "held-out test set for cost models. The same --configs and --seed draw the same "
                                   "configs: run the same command again to resume.")
    p.add_argument("env_id", help="a suite layer's id, e.g. Conv2d-ResNet-R5-v0")
    p.add_argument("--db", required=True, help="the SQLite database of the sample's measurements")
    p.add_argument("--configs", type=int, default=2000, help="configs in the sample (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the draw (default 0)")
    _add_target(p)
    p.add_argument("--out", default=None,
                   help="where the complete sample is written (default: the samples folder beside this CPU's "
                        "landscapes in the package)")
    _add_chunks(p)
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("export", help="write a landscape as one compact file, as T4, or as a Kernel Tuner cache",
                       description="With --db: gather the measured benchmark space of a layer into one compact "
                                   "landscape file (default: where shipped landscapes live, under this CPU's folder). "
                                   "Without --db: take a landscape file, or the layer's shipped landscape (--landscape "
                                   "CPU picks another CPU's), as it is. Either way --t4 also writes the T4 format that "
                                   "autotuning-methodology reads, and --kernel-tuner Kernel Tuner's cache file, which "
                                   "its simulation mode replays; both name the landscape's free parameters only.")
    p.add_argument("source", help="a suite layer's id (e.g. Conv2d-ResNet-R5-v0) or a landscape file (.json.gz; "
                                  "with --db, its space is exported from the measurements)")
    p.add_argument("--db", default=None, help="the SQLite database of the measurements (omit: export a landscape "
                                              "file or a shipped landscape as it is)")
    p.add_argument("--landscape", default=None, help="without --db: the CPU folder of the shipped landscape")
    p.add_argument("--space", default="tiles", choices=SPACES, help="the space of the landscape")
    p.add_argument("--max-configs", type=int, default=None,
                   help=f"with --db: size of the benchmark sub-space (default {DEFAULT_MAX_CONFIGS['tiles']} in the "
                        f"tiles space, {DEFAULT_MAX_CONFIGS['microkernel']} in the microkernel space)")
    p.add_argument("--target", default="llvm", choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help="with --db: this CPU (default), or this CPU restricted to a profile such as x86-64-v3")
    p.add_argument("--anchor-db", default=None, help="with --db: database of the anchoring full-space search "
                                                     "(default: the --db file's name with '-anchor' added)")
    p.add_argument("--anchor-budget", type=int, default=512, help="with --db: measurements of that search (512)")
    p.add_argument("--rounds", type=int, default=1, help="with --db: the measuring rounds to combine (default 1)")
    p.add_argument("--rule", default="stratified", choices=tiles_benchmark.RULES,
                   help="with --db: the rule the tiles benchmark space was measured by (default stratified)")
    _add_importance_choices(p)
    p.add_argument("--out", default=None, help="with --db: the landscape file (default: the package's landscapes "
                                               "folder)")
    p.add_argument("--t4", default=None, help="also write the T4 results document here")
    p.add_argument("--kernel-tuner", default=None, help="also write Kernel Tuner's cache file here")
    p.add_argument("--partial", action="store_true", help="with --db: export even if configs are missing (the "
                                                          "file says so)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("thin", help="drop values from a tiles landscape until it is as hard as its whole space",
                       description="Bring a tiles landscape's difficulty profile (random search's expected best after "
                                   "16, 64 and 256 draws, as a share of the optimum) within "
                                   f"{TOLERANCE} of its layer's full-space sample on the same CPU, by dropping one "
                                   "coordinate value at a time (never the optimum's; a coordinate keeps at least two) "
                                   "while that brings it closer. Nothing is measured: the narrower space's configs "
                                   "are all in the landscape. Writes the landscape file again where it changes "
                                   "(--out: elsewhere, always).")
    p.add_argument("source", help="a suite layer's id (its shipped tiles landscape) or a landscape file (.json.gz)")
    p.add_argument("--landscape", default=None, help="the CPU folder of the shipped landscape (default: this CPU's)")
    p.add_argument("--sample", default=None, help="the full-space sample (default: the shipped one of the "
                                                  "landscape's layer and CPU)")
    p.add_argument("--out", default=None, help="where the landscape goes, thinned or not (default: over the source "
                                               "file, where it changes)")
    p.set_defaults(func=cmd_thin, space="tiles")

    p = sub.add_parser("list", help="every landscape shipped or exported here, with its CPU and fidelity",
                       description="List every landscape in the package's landscapes folder (shipped, or exported "
                                   "on this machine): its CPU, layer, space, configs, optimum and when it was "
                                   "measured, and its fidelity: random search's expected best after 16, 64 and 256 "
                                   "draws as a share of the optimum, on the landscape and, where a full-space sample "
                                   "of the layer is measured on the same CPU (`tensorgym landscape sample`), in the "
                                   "whole space; the landscape is representative where they agree within "
                                   f"{TOLERANCE}.")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("check", help="re-measure random configs of a landscape live: rank agreement",
                       description="Re-measure random configs of the layer's landscape on this machine and report "
                                   "their rank correlation with it: the landscape's own noise figure on its CPU, "
                                   "and how far another CPU's landscape carries over to this one.")
    p.add_argument("env_id", help="a suite layer's id, e.g. Conv2d-ResNet-R5-v0")
    p.add_argument("--space", default="tiles", choices=SPACES, help="the space of the shipped landscape")
    p.add_argument("--landscape", default=None, help="a landscape file (default: the shipped one of this CPU)")
    p.add_argument("--cpu", default=None, help="the CPU folder of a shipped landscape of another CPU")
    p.add_argument("--configs", type=int, default=64, help="configs to re-measure (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", default=":memory:", help="where the live records go (default: nowhere kept)")
    _add_paired(p, "the landscape's best config")
    p.add_argument("--rounds", type=int, default=1,
                   help="live timing rounds per config, each over all of them in its own order; the live figure is "
                        "their median (default 1; use the landscape's own rounds)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_check)


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="llvm", choices=("llvm", "native", *RUNNABLE_PROFILES),
                   help="this CPU (default), or this CPU restricted to a profile such as x86-64-v3")


def _add_importance_choices(p: argparse.ArgumentParser) -> None:
    p.add_argument("--importance-choices", type=int, default=tiles_benchmark.IMPORTANCE_CHOICES,
                   help=f"stratified rule with a full-space sample: the most important coordinate keeps 1 + this "
                        f"many values (default {tiles_benchmark.IMPORTANCE_CHOICES}; more makes the space harder; "
                        f"bench/bench_landscape_plan.py predicts each choice's difficulty)")
    p.add_argument("--importance-top", type=float, default=tiles_benchmark.IMPORTANCE_TOP,
                   help=f"the share of the full-space sample whose values decide each coordinate's importance "
                        f"(default {tiles_benchmark.IMPORTANCE_TOP}: its best kernels; 1: every coordinate alike, "
                        f"values shared out evenly; the planner's --top)")


def _add_paired(p: argparse.ArgumentParser, reference: str) -> None:
    p.add_argument("--paired", action="store_true",
                   help=f"time every kernel in alternation with a fixed reference ({reference}) and keep their "
                        f"ratio: about twice the time, for rankings of near-peak kernels that a noisy machine "
                        f"reproduces")


def _add_chunks(p: argparse.ArgumentParser) -> None:
    """The options of a measuring job run in chunks between other work."""
    p.add_argument("--limit", type=int, default=None, help="measure at most this many configs now (a chunk)")
    p.add_argument("--time-limit", type=finite_float, default=None,
                   help="start no new batch after this many seconds (a chunk)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", help="a suite layer's id, e.g. Conv2d-ResNet-R5-v0")
    p.add_argument("--db", required=True, help="the SQLite database of the measurements")
    p.add_argument("--space", default="tiles", choices=SPACES,
                   help="the space whose benchmark sub-space is measured")
    p.add_argument("--max-configs", type=int, default=None,
                   help=f"size of the benchmark sub-space (default {DEFAULT_MAX_CONFIGS['tiles']} in the tiles "
                        f"space, {DEFAULT_MAX_CONFIGS['microkernel']} in the microkernel space)")
    _add_target(p)
    p.add_argument("--anchor-db", default=None,
                   help="database of the full-space search whose best config anchors the benchmark space (the GA "
                        "in the tiles space, random-structured in the microkernel space; default: the --db file's "
                        "name with '-anchor' added)")
    p.add_argument("--anchor-budget", type=int, default=512,
                   help="measurements of that search (default 512; it runs first when the database lacks them)")
    p.add_argument("--rule", default="stratified", choices=tiles_benchmark.RULES,
                   help="which values each coordinate of the tiles benchmark space keeps (default stratified: in "
                        "proportion to uniform draws from the whole space, so the landscape is as hard as the space; "
                        "stratified-path: those and every value between the anchor's and its nearest kept "
                        "neighbours, the steps a guided search climbs; favoured: the values the CPU favours, the rule "
                        "of landscapes measured before it)")
    _add_paired(p, "the anchor")
    _add_importance_choices(p)
    p.add_argument("--rounds", type=int, default=1,
                   help="measuring rounds per config (default 1): round N>1 measures every config again, in its "
                        "own shuffled order, into the --db file's name with '-roundN' added, and export keeps each "
                        "config's median over the rounds (a VM's passing slowdowns then do not rank a config); each "
                        "config is compiled once, for all its rounds")


def _anchored_space(args: argparse.Namespace, measurer: Measurer | None = None):
    """The anchor (the best record of the full-space search, run first with ``measurer`` if its database does not
    hold the whole search yet) and the layer's benchmark space around it."""
    max_configs = args.max_configs if args.max_configs is not None else DEFAULT_MAX_CONFIGS[args.space]
    if max_configs < 1:
        raise InvalidArgumentError(f"--max-configs must be at least 1, got {max_configs}")
    if args.anchor_budget < 1:
        raise InvalidArgumentError(f"--anchor-budget must be at least 1, got {args.anchor_budget}")
    target = measurer.target if measurer is not None else resolve_target(args.target)
    if target.kind != "llvm":
        raise InvalidArgumentError("landscapes are measured on a CPU target")
    workload = workload_of(args.env_id)
    if args.space not in SPACES:
        raise InvalidArgumentError(f"landscapes are of the {' or '.join(SPACES)} space, not {args.space!r}")
    catalogue = None
    if args.space == "microkernel":
        if not isinstance(workload, Conv2d):
            raise InvalidArgumentError(f"the microkernel benchmark space is defined for conv2d layers; "
                                       f"{args.env_id} is a {workload.op}")
        catalogue = load_catalogue(target)  # CatalogueMissing names the command that calibrates
        full = make_space("microkernel", workload, target, catalogue=catalogue)
    else:
        full = make_space("tiles", workload, target)
    agent = ANCHOR_AGENTS[args.space]
    path = anchor_path(args)
    if measurer is None and not path.exists():  # nothing to read: refuse without leaving an empty file behind
        raise InvalidArgumentError(f"{path} does not exist: it would hold the {args.anchor_budget} measurements of "
                                   f"the {agent} search that anchors the {args.space} benchmark space of "
                                   f"{workload.label}: run `tensorgym landscape measure {args.env_id} --db {args.db} "
                                   f"--space {args.space}` first")
    with Database(path) as database:
        held = database.count(workload.key, target.fingerprint, full.name)
        if held < args.anchor_budget:
            if measurer is None:
                raise InvalidArgumentError(f"{path} holds {held} of the {args.anchor_budget} measurements of the "
                                           f"{agent} search that anchors the {args.space} benchmark space of "
                                           f"{workload.label}: run `tensorgym landscape measure {args.env_id} "
                                           f"--space {args.space}` first")
            print(f"{workload.label}: {agent} searches the full {args.space} space ({args.anchor_budget} "
                  f"measurements, seed 0) for the anchor of the benchmark space; database {path}", file=sys.stderr)
            progress = None if args.quiet else ProgressBarCallback()
            Tuner(Evaluator(full, database, measurer), budget=args.anchor_budget, callback=progress,
                  label=f"anchor {workload.label}").run(make_agent(agent), seed=0)
        best = database.best(workload.key, target.fingerprint, full.name)
    if not best:
        raise InvalidArgumentError(f"no kernel of the {agent} search in {path} ran correctly: nothing anchors the "
                                   f"benchmark space of {workload.label}")
    anchor = best[0]
    if args.space == "microkernel":
        return anchor, microkernel_benchmark.benchmark_space(workload, target, catalogue=catalogue,
                                                             max_configs=max_configs, anchor=anchor.config)
    if args.importance_choices < 1:
        raise InvalidArgumentError(f"--importance-choices must be at least 1, got {args.importance_choices}")
    if not 0 < args.importance_top <= 1:
        raise InvalidArgumentError(f"--importance-top must be in (0, 1], got {args.importance_top}")
    return anchor, tiles_benchmark.benchmark_space(workload, target, max_configs=max_configs, anchor=anchor.config,
                                                   rule=args.rule, importance=_importance(args, full),
                                                   importance_choices=args.importance_choices)


def _importance_sample(args: argparse.Namespace, workload, target) -> Path | None:
    """The layer's full-space sample of this CPU (``tensorgym landscape sample``) whose coordinate importance the
    stratified rule shares its values out by, when one is there (None: every coordinate alike)."""
    path = sample_path(workload, target)
    return path if args.rule in tiles_benchmark.STRATIFIED_RULES and path.is_file() else None


def _importance(args: argparse.Namespace, full) -> dict[str, float] | None:
    """Each coordinate's importance in :func:`_importance_sample`: the benchmark space then spends its choices
    where the whole space's difficulty lies."""
    path = _importance_sample(args, full.workload, full.target)
    if path is None:
        return None
    sample = Landscape.load(path)
    return tiles_benchmark.coordinate_importance(full, list(sample.configs), list(sample.scores),
                                                 top=args.importance_top)


def _space_notes(args: argparse.Namespace, space, anchor) -> dict:
    """What the exported landscape's metadata says of how its benchmark space was chosen, and the anchor search's
    best (as it was timed then: ``landscape list`` sets the landscape's optimum beside it, the "not a toy" check)."""
    found = {"anchor_search": f"{ANCHOR_AGENTS[args.space]}@{args.anchor_budget}", "anchor_gflops": anchor.score}
    if args.space != "tiles":
        return found
    path = _importance_sample(args, space.workload, space.target)
    weighted = {"importance_from": f"samples/{path.name}", "importance_choices": args.importance_choices,
                **({"importance_top": args.importance_top}
                   if args.importance_top != tiles_benchmark.IMPORTANCE_TOP else {})} if path else {}
    return {**found, "rule": args.rule, **weighted}


def anchor_path(args: argparse.Namespace) -> Path:
    """The database of the anchoring GA search: ``--anchor-db``, or the landscape database's name with
    ``-anchor`` added."""
    if args.anchor_db:
        return Path(args.anchor_db)
    db = Path(args.db)
    return db.with_name(f"{db.stem}-anchor{db.suffix or '.db'}")


def _check_rounds(args: argparse.Namespace) -> None:
    if args.rounds < 1:
        raise InvalidArgumentError(f"--rounds must be at least 1, got {args.rounds}")


def cmd_measure(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise InvalidArgumentError(f"--limit must be >= 0, got {args.limit}")
    _check_rounds(args)
    with Database(args.db):  # a --db that cannot be used is refused before the anchor search runs, not after
        pass
    target = resolve_target(args.target)
    with ExitStack() as stack:
        measurer = stack.enter_context(Measurer(target))
        anchor, space = _anchored_space(args, measurer)
        if args.paired or args.rounds > 1:
            # The anchor search is timed as searches are; the landscape against the anchor if paired, and
            # with each config built once for all its rounds.
            measurer.close()
            measurer = stack.enter_context(Measurer(target, paired=anchor.config if args.paired else None,
                                                    keep_builds=args.rounds > 1))
        print(f"{space.workload.label}: {len(space.configs())} configs in the benchmark space on "
              f"{space.target.label}; database {args.db}"
              + ("" if args.rounds == 1 else f" (round 1; rounds 2-{args.rounds} beside it)")
              + (f"; paired with the anchor {anchor.config.key}" if args.paired else ""), file=sys.stderr)
        states = measure_rounds(space, args.db, measurer, rounds=args.rounds, limit=args.limit,
                                time_limit=args.time_limit, progress=not args.quiet)
    for round_no, state in enumerate(states, start=1):
        where = "" if args.rounds == 1 else f" round {round_no}/{args.rounds} ({round_path(args.db, round_no)})"
        left = "complete" if state.done else f"{state.missing} configs still to measure (run again to go on)"
        print(f"{space.workload.label}{where}: {state.measured_now} measured now in {state.seconds:.0f} s, "
              f"{state.held_before} held before; {left}")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    if args.configs < 1:
        raise InvalidArgumentError(f"--configs must be at least 1, got {args.configs}")
    if args.limit is not None and args.limit < 0:
        raise InvalidArgumentError(f"--limit must be >= 0, got {args.limit}")
    target = resolve_target(args.target)
    if target.kind != "llvm":
        raise InvalidArgumentError("landscapes are measured on a CPU target")
    workload = workload_of(args.env_id)
    space = make_space("tiles", workload, target)
    configs = sample_order(space, args.configs, args.seed)
    with Database(args.db) as database, Measurer(target) as measurer:
        print(f"{workload.label}: {len(configs)} configs drawn uniformly from the whole tiles space (seed "
              f"{args.seed}) on {target.label}; database {args.db}", file=sys.stderr)
        state = measure_configs(space, configs, database, measurer, limit=args.limit, time_limit=args.time_limit,
                                progress=not args.quiet, desc=f"sample {workload.label}")
        if state.done:
            sample = export_sample(database, space, configs, seed=args.seed)
            out = sample.save(args.out or sample_path(workload, target))
    left = f"complete, written to {out}" if state.done else \
        f"{state.missing} configs still to measure (run again to go on)"
    print(f"{workload.label} sample: {state.measured_now} measured now in {state.seconds:.0f} s, "
          f"{state.held_before} held before; {left}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.db is not None:
        landscape = _measured_landscape(args)
    else:
        landscape = _given_landscape(args)
        if not (args.t4 or args.kernel_tuner):
            raise InvalidArgumentError(f"{landscape!r} is a landscape file already: name what to write it as, "
                                       f"--t4 FILE or --kernel-tuner FILE (or give --db to export measurements)")
    if args.t4:
        print(f"T4: {write_t4(landscape, args.t4)}")
    if args.kernel_tuner:
        path = write_kernel_tuner_cache(landscape, args.kernel_tuner)
        parameters = ", ".join(f"{k} ({len(v)})" for k, v in free_parameters(landscape).items())
        print(f"Kernel Tuner cache: {path}; its tunable parameters: {parameters}")
    return 0


def _measured_landscape(args: argparse.Namespace) -> Landscape:
    """``export --db``: the landscape of the layer's benchmark space from its measurements, saved to ``--out``.

    A landscape file as the source gives the space (and its notes) itself, so that a shipped landscape measured
    again (``landscape check`` or paired rounds) exports without the database of the search that anchored it."""
    _check_rounds(args)
    if args.source.endswith(SUFFIX) or Path(args.source).is_file():
        given = Landscape.load(args.source)
        space, notes = given.space(resolve_target(args.target)), dict(given.metadata.notes or {})
        args.env_id = given.metadata.env_id
    else:
        args.env_id = args.source
        anchor, space = _anchored_space(args)
        notes = _space_notes(args, space, anchor)
    paths = [round_path(args.db, r) for r in range(2, args.rounds + 1)]
    absent = [str(p) for p in paths if not p.exists()]
    if absent:
        first_absent = args.rounds + 1 - len(absent)
        raise InvalidArgumentError(f"--rounds {args.rounds}: round {first_absent} and on are not measured "
                                   f"({absent[0]} does not exist): measure them first (`tensorgym landscape "
                                   f"measure ... --rounds {args.rounds}`)")
    with ExitStack() as stack:
        database = stack.enter_context(Database(args.db, readonly=True))
        repeats = [stack.enter_context(Database(p, readonly=True)) for p in paths]
        landscape = export_landscape(database, space, env_id=args.env_id, allow_partial=args.partial,
                                     repeats=repeats, notes=notes)
    out = args.out or LANDSCAPES_DIR / landscape.cpu_folder / landscape_filename(space.workload, space.name)
    path = landscape.save(out)
    print(f"{space.workload.label}: {len(landscape)} configs on {landscape.cpu_label} -> {path} "
          f"({path.stat().st_size / 1e3:.0f} kB); optimum {landscape.optimum.score:.1f} GFLOP/s")
    return landscape


def _given_landscape(args: argparse.Namespace) -> Landscape:
    """``export``'s landscape without a database: the file named, or the layer's shipped landscape."""
    return Landscape.load(_landscape_path(args))


def _landscape_path(args: argparse.Namespace) -> Path:
    """The file ``args.source`` names, or the shipped landscape of that layer (``--space``, ``--landscape CPU``)."""
    if args.source.endswith(SUFFIX) or Path(args.source).is_file():
        return Path(args.source)
    return find_landscape(args.source, args.space, cpu=args.landscape)


def cmd_thin(args: argparse.Namespace) -> int:
    source = _landscape_path(args)
    landscape = Landscape.load(source)
    if "sample" in (landscape.metadata.notes or {}):
        raise InvalidArgumentError(f"{source} is a full-space sample, not a landscape: name a layer or a landscape "
                                   f"file")
    sample_file = Path(args.sample) if args.sample else sample_path(landscape.workload, cpu=landscape.cpu_folder)
    if not sample_file.is_file():
        raise InvalidArgumentError(f"no full-space sample of {landscape.workload_label} on {landscape.cpu_folder} "
                                   f"({sample_file}): measure one with `tensorgym landscape sample "
                                   f"{landscape.metadata.env_id or 'ENV_ID'} --db FILE`, or name it with --sample FILE")
    sample = Landscape.load(sample_file)
    before = landscape_fidelity(landscape, sample)
    bounds, steps = thinned_bounds(landscape, sample)
    print(f"{landscape!r}: profile {_shares(before.landscape)} against the whole space's {_shares(before.sample)}, "
          f"gap {before.gap:.3f}")
    for step in steps:
        print(f"  drop {step.label} = {step.value}: {step.configs} configs, gap {step.gap:.3f}")
    if not steps:
        print("  nothing to drop: " + ("within the tolerance already" if before.representative else
                                       "no value's removal brings it closer"))
        if args.out:
            print(f"unchanged -> {landscape.save(args.out)}")
        return 0
    notes = landscape.metadata.notes or {}
    thinned = landscape.narrowed(bounds, {"thinned": [*notes.get("thinned", []),
                                                      *(f"{s.label}={s.value}" for s in steps)],
                                          "configs_before_thinning": notes.get("configs_before_thinning",
                                                                               len(landscape))})
    after = landscape_fidelity(thinned, sample)
    path = thinned.save(args.out or source)
    print(f"{len(thinned)} configs, profile {_shares(after.landscape)}, gap {after.gap:.3f} "
          f"({'within' if after.representative else 'still beyond'} {TOLERANCE}) -> {path}")
    return 0


def _shares(values) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def cmd_list(args: argparse.Namespace) -> int:
    here = cpu_folder()
    rows = []
    for shipped in shipped_landscapes():
        land = Landscape.load(shipped.path)
        profile = random_search_profile(land.scores, float(land.scores.max()))
        whole, gap = "", ""
        if shipped.sample.is_file():
            fidelity = landscape_fidelity(land, Landscape.load(shipped.sample))
            whole = _shares(fidelity.sample)
            gap = f"{fidelity.gap:.3f}" + (" ok" if fidelity.representative else "")
        optimum, anchor = float(land.scores.max()), (land.metadata.notes or {}).get("anchor_gflops")
        rows.append((shipped.cpu + (" (this CPU)" if shipped.cpu == here else ""), shipped.layer, shipped.space,
                     str(len(land)), f"{optimum:.1f}", f"{optimum / anchor:.2f}" if anchor else "-",
                     (land.metadata.measured_to or "")[:10],
                     _shares(profile), whole or "no sample", gap))
    if not rows:
        print(f"no landscapes in {LANDSCAPES_DIR}: measure one with `tensorgym landscape measure ENV_ID --db FILE`")
        return 0
    print(format_table(rows, ("CPU", "layer", "space", "configs", "optimum GFLOP/s", "/ anchor search", "measured",
                              "random@16/64/256", "whole space @16/64/256", "gap")))
    print(f"\nrandom@N: random search's expected best of N draws as a share of the optimum (of the landscape; of the "
          f"best known, in the whole space's sample). gap: the largest difference; 'ok' within {TOLERANCE}. / anchor "
          f"search: the optimum over the best of the full-space search the space was built around, as timed then "
          f"(files exported before it was recorded show -).")
    if here not in {s.cpu for s in shipped_landscapes()}:
        print(f"this CPU ({here}) has no landscapes: runs on a landscape use another CPU's, as benchmarks of search "
              f"(measure this CPU's with `tensorgym landscape measure`)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    if args.configs < 2:
        raise InvalidArgumentError(f"--configs must be at least 2 (a rank correlation), got {args.configs}")
    _check_rounds(args)
    path = args.landscape or find_landscape(args.env_id, args.space, cpu=args.cpu)
    landscape = Landscape.load(path)
    target = resolve_target(None)
    reference = landscape.optimum.config if args.paired and landscape.optimum is not None else None
    with Database(args.db) as database, Measurer(target, paired=reference, keep_builds=args.rounds > 1) as measurer:
        report = check_landscape(landscape, database, measurer, configs=args.configs, seed=args.seed,
                                 rounds=args.rounds, progress=not args.quiet)
    print(report.summary())
    return 0
