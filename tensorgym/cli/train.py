"""``tensorgym train``: train a stable-baselines3 policy on tensorgym envs (replay, landscapes or real measurements).

  tensorgym train --algo maskable-ppo --envs "Conv2d-ResNet-R*" --backend replay --db data.db \\
      --timesteps 200000 --out policies/r50 [--eval-envs "Conv2d-YOLO-Y*"] [--eval-budget 64]
  tensorgym train --envs "Conv2d-ResNet-R5-v0,Matmul-BERT-M3-v0" --backend landscape \\
      --eval-envs Conv2d-ResNet18-C7-v0 --out policies/landscapes     # no database, nothing measured

Writes ``best.zip`` (use it with ``tensorgym tune ENV --agent rl --policy out/best.zip``), ``final.zip``,
checkpoints, ``progress.csv`` (and TensorBoard logs when tensorboard is installed) and ``evaluation.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorgym.database import Database, default_path
from tensorgym.envs.base import BACKENDS
from tensorgym.envs.registration import matching_env_ids, workload_of
from tensorgym.errors import InvalidArgumentError
from tensorgym.text import format_table


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="train a stable-baselines3 policy on tensorgym envs",
                              description="Train PPO, MaskablePPO or DQN on several layers at once (one policy for "
                                          "all of them), on the replay backend (a dataset), on landscapes "
                                          "(shipped measurements) or on real measurements; evaluate it on "
                                          "held-out layers.")
    p.add_argument("--algo", default="maskable-ppo", choices=("ppo", "maskable-ppo", "dqn"),
                   help="algorithm (default: maskable-ppo)")
    p.add_argument("--envs", required=True,
                   help="training layers: env ids or patterns ('Conv2d-ResNet-R*,Matmul-BERT-M3-v0'), or 'dataset' "
                        "for every layer of --db that replay can start from")
    p.add_argument("--eval-envs", default="",
                   help="held-out layers evaluated after training (ids or patterns; none by default)")
    p.add_argument("--backend", choices=BACKENDS, default="replay",
                   help="replay answers from --db (no compiling); landscape from each layer's shipped landscape "
                        "(no database, no compiling); tvm measures (default: replay)")
    p.add_argument("--eval-backend", choices=BACKENDS, default=None,
                   help="backend of the held-out evaluation (default: --backend)")
    p.add_argument("--landscape", default=None, metavar="CPU",
                   help="the CPU folder of the landscapes (landscape backend; default: this machine's CPU; "
                        "another CPU's landscapes are used only when named here)")
    p.add_argument("--space", choices=("tiles", "microkernel"), default="tiles", help="the env (default: tiles)")
    p.add_argument("--db", default=None, help=f"SQLite database (default: $TENSORGYM_DB or {default_path()})")
    p.add_argument("--timesteps", type=int, default=200_000, help="training steps (default: 200000)")
    p.add_argument("--n-envs", type=int, default=4, help="parallel envs, each drawing a layer per episode (default: 4)")
    p.add_argument("--vec", choices=("dummy", "subproc"), default="dummy",
                   help="DummyVecEnv (one process, default) or SubprocVecEnv (replay and landscape only)")
    p.add_argument("--max-steps", type=int, default=32, help="steps per episode (default: 32)")
    p.add_argument("--eval-budget", type=int, default=64, help="measurements per held-out layer (default: 64)")
    p.add_argument("--eval-freq", type=int, default=None,
                   help="timesteps between evaluations that keep best.zip (default: a tenth of the run on replay "
                        "and landscape, none on tvm)")
    p.add_argument("--checkpoint-freq", type=int, default=None, help="timesteps between checkpoints")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output directory, e.g. policies/r50")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _layers(text: str, db: str, exclude=()) -> list:
    if text.strip() == "dataset":
        from tensorgym.agents.rl.train import dataset_layers

        if not Path(db).exists():
            raise InvalidArgumentError(f"{db} does not exist (build a dataset with `tensorgym dataset build`)")
        with Database(db) as database:
            layers = [wl for wl in dataset_layers(database) if wl.key not in {e.key for e in exclude}]
        if not layers:
            raise InvalidArgumentError(f"{db} holds no layer the replay backend can start from "
                                       f"(build one with `tensorgym dataset build`)")
        return layers
    return [workload_of(i) for i in matching_env_ids(text)]


def run(args: argparse.Namespace) -> int:
    from tensorgym.agents.rl.train import check_landscapes, train

    backends = {args.backend, args.eval_backend or args.backend}
    # The landscape backend needs no database: none is named, opened or created unless another backend needs it.
    needs_db = bool(backends & {"replay", "tvm"}) or "dataset" in (args.envs.strip(), args.eval_envs.strip())
    db = (args.db if args.db is not None else default_path()) if needs_db else None
    held_out = _layers(args.eval_envs, db) if args.eval_envs.strip() else []
    layers = _layers(args.envs, db, exclude=held_out)
    # The database is checked before it is named, so that a refused one prints its error alone: an existing
    # path must open as a tensorgym database (not a directory, not another file); the replay backend needs one.
    if db is not None:
        if Path(db).exists() or Path(db).is_symlink():
            Database(db, readonly=True).close()
        elif "replay" in backends:
            raise InvalidArgumentError(f"{db} does not exist: the replay backend trains on a dataset "
                                       f"(`tensorgym dataset build --db {db}`)")
        print(f"database: {db}", file=sys.stderr)
    if args.backend == "landscape":  # refused (one line, alone) before anything is printed
        check_landscapes(layers, args.space, args.landscape)
    if (args.eval_backend or args.backend) == "landscape":
        check_landscapes(held_out, args.space, args.landscape)
    print(f"training {args.algo} on {len(layers)} layer(s), {args.backend} backend, {args.timesteps} steps; "
          f"{len(held_out)} held-out layer(s)", file=sys.stderr)
    report = train(args.algo, layers, db=db, out=args.out, backend=args.backend, space=args.space,
                   timesteps=args.timesteps, n_envs=args.n_envs, vec=args.vec, max_steps=args.max_steps,
                   seed=args.seed, eval_envs=held_out, eval_budget=args.eval_budget, eval_backend=args.eval_backend,
                   eval_freq=args.eval_freq, checkpoint_freq=args.checkpoint_freq, progress=not args.quiet,
                   landscape=args.landscape)
    print(f"trained in {report['train_seconds']:.0f} s; policy: {report['policy']}")
    rows = []
    for entry in report["evaluation"]:
        # What the policy could at most find: the dataset's best record (replay), the true optimum (landscape).
        reference = entry.get("dataset_best_gflops") or entry.get("optimum_gflops")
        found = entry.get("best_gflops")
        rows.append((entry["layer"], entry["backend"], entry.get("trials", "-"),
                     f"{found:.1f}" if found is not None else entry.get("error", "-")[:60],
                     f"{reference:.1f}" if reference else "-",
                     f"{found / reference:.2f}" if found is not None and reference else "-"))
    if rows:
        print(format_table(rows, ("held-out layer", "backend", "trials", "best GFLOP/s", "best known", "ratio")))
    print(f"use it: tensorgym tune ENV_ID --agent rl --policy {report['policy']}")
    return 0
