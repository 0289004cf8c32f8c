"""``tensorgym tune ENV_ID``: tune one environment with a search agent, then compare with the vendor library;
when the kernel trails the vendor and another space does better for the operator, say which (:mod:`.advice`)."""

from __future__ import annotations

import argparse
import json
import sys

from tensorgym.catalog import ENVS, make_agent, space_class
from tensorgym.checks import integer
from tensorgym.database import database_path, default_path
from tensorgym.envs.registration import make_env, with_layout, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.record import BUSY_SHARE
from tensorgym.target import RUNNABLE_PROFILES, resolve_target
from tensorgym.text import format_table
from tensorgym.tuner import ProgressBarCallback, TuningResult, check_budget
from tensorgym.workloads import SUPPORTED_DTYPES

from .advice import advice_line, space_advice
from .args import add_rpc_argument, add_run_arguments, finite_float, output_file, rpc_target
from .shapes import parse_shape


def default_space(agent, workload, target) -> str:
    """The agent's space, or on a CPU ``mapping`` for int8 and bf16 workloads (the only CPU space that maps them);
    on a GPU the agent's space takes float16 and bf16 too."""
    return agent.env_space if workload.dtype == "float32" or target.kind == "cuda" else "mapping"


def check_space_dtype(space: str, workload, target) -> None:
    """Refuse, before anything is created, a space that cannot schedule the workload's dtype on ``target``."""
    cls = space_class(space).for_target(target)
    if workload.dtype not in cls.supported_dtypes:
        supporting = [name for name in ENVS
                      if workload.dtype in space_class(name).for_target(target).supported_dtypes]
        raise InvalidArgumentError(f"the {space} space tunes {', '.join(cls.supported_dtypes)} kernels, not "
                                   f"{workload.dtype}; use --space {' or '.join(supporting)}")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tune", help="tune one environment with a search agent")
    p.add_argument("env_id", help="e.g. Conv2d-ResNet-R5-v0 (see `tensorgym list`)")
    p.add_argument("--shape", help="shape of tensorgym/Conv2d-v0 or tensorgym/Matmul-v0, e.g. M=512,N=768,K=3072")
    p.add_argument("--agent", default="random", help="search agent (default: random)")
    p.add_argument("--target", default="llvm", choices=("llvm", "native", "cuda", *RUNNABLE_PROFILES),
                   help="llvm (this CPU, default; after $TENSORGYM_CPU), native (this CPU as it is), cuda (this "
                        "machine's GPU), or a CPU profile this CPU acts as (x86-64-v3: AVX2 + FMA; `tensorgym info`)")
    p.add_argument("--space", default=None, choices=tuple(ENVS),
                   help="search space (default: the agent's, tiles for most; mapping for int8 and bf16)")
    p.add_argument("--dtype", default="float32", choices=SUPPORTED_DTYPES,
                   help="data type (default: float32; int8 = uint8 x int8 -> int32, bf16 -> fp32; "
                        "float16 -> fp32 on a GPU)")
    p.add_argument("--layout", choices=("NCHW", "NHWC", "NCHWc", "NCHW8c", "NCHW16c"), default=None,
                   help="conv2d data layout (default: the env's, NCHW); NHWC and NCHWc are oneDNN's, NCHWc "
                        "blocking channels by the target's fp32 lanes (NCHW16c on AVX-512, NCHW8c on AVX2)")
    p.add_argument("--packing", choices=("in-kernel", "weights", "all"), default=None,
                   help="what the kernel receives packed: tiles space (NCHW conv2d) in-kernel or weights; "
                        "microkernel space in-kernel (default), weights or all. The vendor reference is then "
                        "one with pre-packed weights too")
    p.add_argument("--features", choices=("af", "generic", "both", "all"),
                   help="cost-model features of the ga / dgd agents (default: both)")
    p.add_argument("--model",
                   help="the agent's model: for ga / dgd the cost model, log-shallow (default), ansor-shallow, ansor, "
                        "draft or random (XGBoost on log throughput with shallow trees, Ansor's XGBoost with shallow "
                        "trees, Ansor's XGBoost, the same boosted from the analytical draft, or random scores: "
                        "the ablation); for one-shot the predictor file written by `tensorgym oneshot train`")
    p.add_argument("--policy", help="policy file of the rl agent (written by `tensorgym train`)")
    p.add_argument("--top-k", type=int, help="configs the one-shot agent measures (default: 32)")
    p.add_argument("--budget", type=int, default=64, help="measurements (default: 64)")
    p.add_argument("--time-budget", type=finite_float, default=None, help="seconds of tuning (default: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the tuning history to this JSON file")
    p.add_argument("--backend", default="tvm", choices=("tvm", "replay", "landscape"),
                   help="tvm: compile and time (default); replay: only configs --db holds; landscape: the layer's "
                        "shipped landscape of this CPU (tiles space; nothing compiled, the true optimum known)")
    p.add_argument("--landscape", default=None, metavar="CPU",
                   help="with --backend landscape: the landscape of this CPU folder (another machine's, named "
                        "explicitly), or a landscape file")
    add_run_arguments(p)
    add_rpc_argument(p)
    p.set_defaults(func=run)


def agent_options(args: argparse.Namespace) -> dict:
    """The agent's constructor options given on the command line (only those given)."""
    given = {"features": args.features, "policy": args.policy, "model": args.model, "k": args.top_k}
    return {name: value for name, value in given.items() if value is not None}


def trials_line(result: TuningResult, db) -> str:
    """What a run (of ``tune`` or ``tune-network``) spent: its trials, measured now or answered from ``db``."""
    return (f"{len(result.trials)} trials ({result.measured} measured now, {result.reused} from {db}), "
            f"{result.wall_s:.1f} s")


def _tune_on_landscape(args: argparse.Namespace, workload, agent, space: str) -> int:
    """``tune --backend landscape``: the run answered from the layer's landscape; its best beside the true optimum."""
    from tensorgym.landscape.shipped import LANDSCAPE_SPACES

    if space not in LANDSCAPE_SPACES or args.packing or args.layout or args.rpc or \
            args.target not in ("llvm", "native"):
        raise InvalidArgumentError("landscapes are of the tiles or microkernel space of a suite layer as registered, "
                                   "on this CPU: drop --packing, --layout, --rpc and --target, and use --space tiles "
                                   "or microkernel")
    if args.db is not None:  # a landscape answers every trial from its file: nothing would reach the database
        raise InvalidArgumentError("--backend landscape measures nothing, so it writes no --db: drop --db")
    env = make_env(workload, space=space, backend="landscape", landscape=args.landscape)
    try:
        result = agent.tune(env, budget=args.budget, time_budget=args.time_budget, seed=args.seed,
                            callback=None if args.quiet else ProgressBarCallback())
        landscape = env.unwrapped.evaluator.landscape
    finally:
        env.close()
    if args.json:
        result.save(args.json)
    optimum = float(landscape.scores.max())
    print(f"\n{args.env_id}: {workload.label} on the landscape of {landscape.cpu_label} ({len(landscape)} configs, "
          f"simulated: nothing compiled)")
    print(f"agent {result.agent} (seed {result.seed}): {len(result.trials)} trials, "
          f"{result.trials[-1].elapsed_s if result.trials else 0.0:.1f} s of simulated tuning clock")
    print(f"best {result.best_gflops:.1f} {workload.throughput_unit}, {100 * result.best_gflops / optimum:.1f} % of "
          f"the landscape's optimum ({optimum:.1f})")
    if result.best_config is not None:
        print(f"best config: {json.dumps(result.best_config.to_json())}")
    return 0


def run(args: argparse.Namespace) -> int:
    # Everything that can be refused is checked before the database file is created.
    workload = workload_of(args.env_id, parse_shape(args.shape)).with_dtype(args.dtype)
    if args.rpc is not None and args.target not in ("llvm", "native"):
        raise InvalidArgumentError(f"--rpc times on a remote CPU; it does not combine with --target {args.target}")
    target = resolve_target(args.target)  # this CPU, or this machine's GPU (one clear error without one)
    if args.layout:
        workload = with_layout(workload, args.layout, target)
    agent = make_agent(args.agent, **agent_options(args))
    space = args.space or default_space(agent, workload, target)
    agent.check_space(space)
    check_space_dtype(space, workload, target)
    check_budget(args.budget, args.time_budget)
    integer("--seed", args.seed, minimum=0)
    if args.json is not None:
        output_file("--json", args.json)
    if args.backend == "landscape":
        return _tune_on_landscape(args, workload, agent, space)
    if args.landscape is not None:
        raise InvalidArgumentError("--landscape names the landscape of --backend landscape; give that backend too")
    remote = rpc_target(args.rpc)
    target = remote if remote is not None else target
    db = database_path(args.db) if args.db is not None else default_path()
    env = make_env(workload, space=space, db=db, target=target, backend=args.backend,
                   **({"packing": args.packing} if args.packing else {}))  # opens the database
    # Named once it opened: a refused command prints its error alone.
    print(f"database: {db}" + (f"; timing on {target.label}" if target.kind == "cuda" or remote is not None else "")
          + ("; replaying its records (nothing compiled)" if args.backend == "replay" else ""), file=sys.stderr)
    try:
        result = agent.tune(env, budget=args.budget, time_budget=args.time_budget, seed=args.seed,
                            callback=None if args.quiet else ProgressBarCallback())
    finally:
        env.close()
    if args.json:
        result.save(args.json)

    unit = workload.throughput_unit
    amount = "GOP" if workload.dtype == "int8" else "GFLOP"
    print(f"\n{args.env_id}: {workload.label}, {workload.describe()}, {workload.gflop:.4g} {amount}")
    print(f"agent {result.agent} (seed {result.seed}) in the {result.space} space: {trials_line(result, db)}")
    rows = []
    if result.best_config is not None:
        rows.append((f"tensorgym {result.agent} best", f"{result.best_gflops:.1f}",
                     f"{result.best_latency_s * 1e3:.3f}", f"{result.best_latency_cv * 100:.1f}", ""))
    else:
        print("no config ran correctly; see `tensorgym show` for the errors")
    busy = result.extra.get("busy_trials", 0)
    ratio = None  # the tuned kernel over the vendor reference; None without one, or from a busy timing
    if remote is not None and not args.no_vendor:
        print("(no vendor reference: the vendor libraries run on this machine, not on the remote device)")
    elif not args.no_vendor:
        from tensorgym.baselines import VendorUnavailable, time_vendor, vendor_choices
        from tensorgym.baselines.vendor import ratio_text

        try:
            pre_packed = args.packing in ("weights", "all")
            choice = next(((lib, lay) for lib, lay in vendor_choices(workload, target)
                           if ("pre-packed" in lay) == pre_packed), (None, None))
            ref = time_vendor(workload, *choice, target=target)
            rows.append((f"{ref.library} {ref.layout}", f"{ref.gflops:.1f}", f"{ref.latency_s * 1e3:.3f}",
                         f"{ref.latency_cv * 100:.1f}", "busy machine" if ref.busy else ref.kernel))
            if result.best_gflops:
                kernel_busy = result.extra.get("best_busy", False)
                rows[0] = (*rows[0][:4], ratio_text(result.best_gflops, ref, kernel_busy=kernel_busy))
                if ref.gflops and not (kernel_busy or ref.busy):
                    ratio = result.best_gflops / ref.gflops
            busy += ref.busy
        except VendorUnavailable as exc:
            print(f"(no vendor reference: {exc})")
    if rows:
        print(format_table(rows, ("kernel", unit, "latency ms", "cv %", "")))
    if busy:
        print(f"warning: the machine was busy: {busy} timing(s) of this run saw other processes take more than "
              f"{BUSY_SHARE:.0%} of the cores; those GFLOP/s are what a busy machine gave, and no ratio is drawn "
              f"from them", file=sys.stderr)
    if result.best_config is not None:
        print(f"best config: {json.dumps(result.best_config.to_json())}")
        searched = env.unwrapped.search_space
        if searched.name == result.space and searched.is_valid(result.best_config):
            print(f"best kernel: {searched.describe(result.best_config)}")
    advice = space_advice(workload.op, workload.dtype, result.space, ratio, target_kind=target.kind,
                          mapping_dtypes=_mapping_dtypes(target))
    if advice is not None:
        print(advice_line(advice, ratio, result.space, args.env_id, _same_problem_options(args, advice.space)))
    return 0


def _mapping_dtypes(target) -> frozenset[str]:
    """The dtypes the mapping space has an exact intrinsic for on ``target`` (as ``tensorgym info`` lists them)."""
    from tensorgym.spaces.mapping.intrinsics import runnable_dtypes

    return runnable_dtypes(target)


def _same_problem_options(args: argparse.Namespace, space: str) -> list[str]:
    """The options of this ``tune`` that the advised command repeats: the same problem, target, budget and
    database (``--packing`` only into the microkernel space, the other space that takes it)."""
    given = [("--shape", args.shape), ("--dtype", None if args.dtype == "float32" else args.dtype),
             ("--target", None if args.target == "llvm" else args.target), ("--layout", args.layout),
             ("--packing", args.packing if space == "microkernel" else None), ("--budget", args.budget),
             ("--time-budget", args.time_budget), ("--db", args.db)]
    return [text for option, value in given if value is not None for text in (option, str(value))]
