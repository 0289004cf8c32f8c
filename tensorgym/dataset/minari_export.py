"""Offline-RL data as Minari datasets: episodes of the tile-hop env over a landscape or a measurement database.

A dataset is ``N`` episodes of one layer's tile-hop env (``gym.make(env_id, ...)``), recorded by Minari's own
``DataCollector`` wrapper and written with its ``create_dataset``, so ``minari.load_dataset`` reads it like
any other Minari dataset::

    export_landscape_dataset("Conv2d-ResNet-R5-v0", landscape="amd-epyc-zen4-avx512-2c", episodes=100, seed=0,
                             out="minari-data")
    export_database_dataset("Conv2d-ResNet-R5-v0", db="runs.db", episodes=100, seed=0, out="minari-data")

    os.environ["MINARI_DATASETS_PATH"] = "minari-data"
    dataset = minari.load_dataset("tensorgym/conv2d-resnet-r5-landscape-amd-epyc-zen4-avx512-2c/random-v0")

**Sources.** :func:`export_landscape_dataset` walks a landscape (``backend="landscape"``: every config of a
benchmark space, measured once; ``landscape=`` a CPU folder of the shipped ones, a landscape file, or None
for this CPU's); :func:`export_database_dataset` walks a database's records of the layer
(``backend="replay"``: moves reach recorded configs only). Both env backends compile and time nothing.

**Behaviour policy** (:class:`BehaviourPolicy`). At every step the policy picks among the actions the env
allows (``info["action_mask"]``, so no step is a masked move): with probability ``greedy`` the greedy
action, the allowed move to the config of highest *recorded* throughput (the landscape's median, or the
database's record; a failed kernel counts 0; ties broken at random), otherwise an allowed action drawn
uniformly. ``greedy=0`` is a uniformly random walk; a share of greedy steps adds climbs towards good configs,
so the data holds good trajectories too. The greedy step reads recorded values, never the episode's noisy
draws: it is a policy a user could run, not an oracle of the noise.

**Seeds.** Episode ``i`` resets the env with seed ``episode_seeds(seed, n)[i]`` (the first 32-bit word of the
``i``-th child of ``numpy.random.SeedSequence(seed)``: the same for any ``n`` above ``i``), which picks its
start config and, on a landscape, its noise draws; the policy draws from its own stream of the same seed.
Minari stores each episode's seed (``dataset.storage.get_episode_metadata([i])``), so ``env.reset(seed=s)``
and the recorded actions replay an episode exactly: observations, rewards and ends (a database answers a
config with the same record; a landscape draws the same noise for the same seed). Under another seed, a
landscape episode started at the same config (``reset(options={"config": ...})``) visits the same configs
with other draws of their throughputs.

**What is stored.** Observations and actions as the env declares them (a ``Box`` and a ``Discrete``: Minari
stores both; a space Minari cannot serialise is refused before anything is written). Infos, at the reset
and at every step, hold a fixed subset of the env's: ``action_mask`` (bool), ``config`` (the state's config
as JSON text), ``status``, ``gflops``, ``best_gflops`` and ``tried_gflops`` (NaN: the move was masked or its
kernel failed). Minari's arrow format (``pyarrow``) is used: it stores the text infos. The metadata holds
Minari's fields (``algorithm_name``: the policy's name; ``author``, ``author_email``, ``code_permalink`` when
given; a ``description``; ``requirements``: this tensorgym) and, under ``"tensorgym"``, what a user needs to
rebuild the env and judge the data: the env id and keywords, the source (landscape CPU folder, file and
SHA-256, or database path and record count), the policy, the seeds and tensorgym's version.

**Rebuilding the env.** Minari's ``recover_environment()`` rebuilds it from the env spec, which for a suite
id holds the layer as JSON that the id's entry point does not take back: use :func:`make_dataset_env`
(``gym.make`` of the id and keywords the metadata records), or pass ``workload=`` to ``recover_environment``.

**Ids** (:func:`default_dataset_id`): ``tensorgym/<layer>-<source>/<policy>-v<version>``, e.g.
``tensorgym/conv2d-resnet-r5-landscape-amd-epyc-zen4-avx512-2c/random-v0`` or
``tensorgym/matmul-m8-n16-k8-replay-runs/greedy25-v0``; Minari's rules: ``(namespace/)name-vN``, names of
letters, digits, ``-`` and ``_``.

**Where.** Minari reads the datasets' root from ``MINARI_DATASETS_PATH`` (default ``~/.minari/datasets``);
``out=`` sets that variable for the export and restores it after. Minari ``0.5.4`` with its ``create``
(jax: the collector's episode buffers) and ``arrow`` extras: ``pip install 'tensorgym[minari]'``.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..config import Config
from ..errors import InvalidArgumentError, InvalidTypeError, UnknownNameError
from ..landscape import find_landscape
from ..target import Target
from .export import MissingExtra

DATA_FORMAT = "arrow"  # stores the text infos (config, status); pyarrow comes with the data and test extras
DATASETS_PATH_VARIABLE = "MINARI_DATASETS_PATH"
NAMESPACE = "tensorgym"
POLICY_STREAM = 0x5EED_B0B  # mixed into an episode's seed for the policy's draws: a stream of its own
INSTALL_HINT = "pip install 'tensorgym[minari]'"
# Minari's dataset id: (namespace/)name-vN; the version is required (0.5.4 parses it as an int).
DATASET_ID_RE = re.compile(r"^(?:[-\w][-\w/]*[-\w]/)?[-\w]+-v\d+$")


# -- the behaviour policy ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BehaviourPolicy:
    """Uniformly random among the allowed actions, with a share ``greedy`` of greedy steps (see the module docs).

    Attributes:
        greedy: the probability that a step takes the allowed move to the config of highest recorded throughput.
    """

    greedy: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.greedy, bool) or not isinstance(self.greedy, (int, float)) \
                or not 0.0 <= self.greedy <= 1.0:
            raise InvalidArgumentError(f"greedy must be a share of steps in [0, 1], got {self.greedy!r}")

    @property
    def name(self) -> str:
        """``random``, ``greedy``, or ``greedy<percent>`` (``greedy25``: a quarter of the steps greedy)."""
        if self.greedy == 0:
            return "random"
        if self.greedy == 1:
            return "greedy"
        return f"greedy{100 * self.greedy:g}".replace(".", "p")

    def describe(self) -> str:
        random_part = "uniformly random among the allowed actions (info['action_mask'])"
        greedy_part = ("the allowed move to the config of highest recorded throughput (failed kernels count 0, "
                       "ties broken at random)")
        if self.greedy == 0:
            return random_part
        if self.greedy == 1:
            return greedy_part
        return f"with probability {self.greedy:g}: {greedy_part}; otherwise {random_part}"

    def act(self, rng: np.random.Generator, mask: np.ndarray, value_of: Callable[[int], float]) -> int:
        """The action at a state whose allowed actions are ``mask``; ``value_of(action)`` is the recorded
        throughput of the config an allowed action reaches (asked only for greedy steps). With no allowed
        action (the envs end an episode before that), any action: the env answers it with its penalty."""
        allowed = np.flatnonzero(mask)
        if not len(allowed):
            return int(rng.integers(len(mask)))
        if self.greedy > 0 and rng.random() < self.greedy:
            values = np.array([value_of(int(a)) for a in allowed], dtype=np.float64)
            allowed = allowed[values == values.max()]
        return int(allowed[int(rng.integers(len(allowed)))])


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """The reset seed of each episode (see the module docs): a prefix of a longer run's seeds."""
    return [int(child.generate_state(1, np.uint32)[0]) for child in np.random.SeedSequence(seed).spawn(episodes)]


# -- what an export wrote -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MinariExport:
    """One written dataset.

    Attributes:
        dataset_id: its Minari id (``minari.load_dataset(dataset_id)`` with ``MINARI_DATASETS_PATH=root``).
        root: the datasets' root it was written under; ``path``: its own folder.
        episodes, steps: what it holds.
        source: the landscape or database walked, in words; ``policy``: the behaviour policy's name.
    """

    dataset_id: str
    root: Path
    episodes: int
    steps: int
    source: str
    policy: str
    seed: int

    @property
    def path(self) -> Path:
        return self.root / self.dataset_id

    def summary(self) -> str:
        return (f"wrote {self.dataset_id}: {self.episodes} episodes, {self.steps} steps of {self.source}, "
                f"{self.policy} policy, seed {self.seed}, to {self.path}")


# -- the exporters --------------------------------------------------------------------------------------------------
def export_landscape_dataset(env_id: str, *, landscape: str | os.PathLike | None = None, episodes: int = 100,
                             seed: int = 0, greedy: float = 0.0, steps: int | None = None,
                             out: str | os.PathLike | None = None, dataset_id: str | None = None,
                             env_kwargs: Mapping[str, Any] | None = None, author: str | None = None,
                             author_email: str | None = None, code_permalink: str | None = None,
                             progress: bool = False) -> MinariExport:
    """Write ``episodes`` episodes of ``env_id``'s tile-hop env over a landscape as a Minari dataset.

    Args:
        env_id: a tensorgym id (``Conv2d-ResNet-R5-v0``; ``tensorgym/Matmul-v0`` with its shape in ``env_kwargs``).
        landscape: a CPU folder of the shipped landscapes, a landscape file, or None: this CPU's.
        episodes, seed, greedy: how many episodes, the run's seed, the behaviour policy's share of greedy steps.
        steps: the episodes' length (None: the id's, 64); an episode that reaches a dead end ends earlier.
        out: the datasets' root (None: ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``).
        dataset_id: the Minari id (None: :func:`default_dataset_id`); an id that exists under ``out`` is refused.
        env_kwargs: other ``gym.make`` keywords (a shape, ``observation=``, ``target=``).
        author, author_email, code_permalink: Minari's metadata fields of the same names.
        progress: show a progress bar of the episodes.

    Raises a one-line :class:`~tensorgym.errors.TensorgymError` for an unknown id, a layer without a landscape
    (for this CPU, or the one named), a bad argument or id, before anything is written.
    """
    if landscape is not None and not isinstance(landscape, (str, os.PathLike)):
        raise InvalidTypeError(f"landscape must be a CPU folder name or a landscape file, got "
                               f"{type(landscape).__name__}")
    options = _Options.checked(episodes, seed, greedy, steps, env_kwargs)
    _check_env_id(env_id)
    return _open_and_export(env_id, options, lambda base: _landscape_source(base, landscape),
                            {"backend": "landscape", "landscape": landscape}, out=out, dataset_id=dataset_id,
                            author=author, author_email=author_email, code_permalink=code_permalink,
                            progress=progress)


def export_database_dataset(env_id: str, *, db: str | os.PathLike, episodes: int = 100, seed: int = 0,
                            greedy: float = 0.0, steps: int | None = None, out: str | os.PathLike | None = None,
                            dataset_id: str | None = None, env_kwargs: Mapping[str, Any] | None = None,
                            author: str | None = None, author_email: str | None = None,
                            code_permalink: str | None = None, progress: bool = False) -> MinariExport:
    """Write ``episodes`` episodes of ``env_id``'s tile-hop env replaying the database ``db`` as a Minari dataset.

    The env answers only from ``db``'s records of the layer on its target (this CPU unless ``env_kwargs`` names
    a ``target``), opened read-only. The other arguments are :func:`export_landscape_dataset`'s. Raises a
    one-line :class:`~tensorgym.errors.TensorgymError` for a missing file, or a database without records of
    the layer, before anything is written.
    """
    if not isinstance(db, (str, os.PathLike)):
        raise InvalidTypeError(f"db must be the path of a database file, got {type(db).__name__}")
    path = Path(db).expanduser().resolve()
    if not path.is_file():
        raise InvalidArgumentError(f"database {path} does not exist")
    options = _Options.checked(episodes, seed, greedy, steps, env_kwargs)
    _check_env_id(env_id)
    return _open_and_export(env_id, options, lambda base: _database_source(base, path),
                            {"backend": "replay", "db": str(path)}, out=out, dataset_id=dataset_id,
                            author=author, author_email=author_email, code_permalink=code_permalink,
                            progress=progress)


def _open_and_export(env_id: str, options: "_Options", source_of: Callable[[Any], "_Source"],
                     env_source: Mapping[str, Any], **export: Any) -> MinariExport:
    """Open the env over its source, describe the source, and write the dataset (the env is closed either way)."""
    env = _make(env_id, options, **env_source)
    try:
        source = source_of(env.unwrapped)
    except BaseException:
        env.close()
        raise
    return _export(env, env_id, source, options, **export)


# -- ids -----------------------------------------------------------------------------------------------------------
def slug(text: str) -> str:
    """``text`` as a Minari name part: lower case letters, digits, ``-`` and ``_``."""
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]", "-", text.lower())).strip("-")


def default_dataset_id(env_id: str, source_tag: str, policy: BehaviourPolicy | str,
                       shape: Mapping[str, Any] | None = None, version: int = 0) -> str:
    """``tensorgym/<layer>-<source>/<policy>-v<version>`` (see the module docs); ``shape``: a parametric id's."""
    layer = re.sub(r"-v\d+$", "", env_id.removeprefix(f"{NAMESPACE}/"))
    if shape:
        layer += "-" + "-".join(f"{k}{v}" for k, v in shape.items())
    name = policy.name if isinstance(policy, BehaviourPolicy) else policy
    return f"{NAMESPACE}/{slug(layer)}-{slug(source_tag)}/{slug(name)}-v{version}"


def check_dataset_id(dataset_id: str) -> str:
    """``dataset_id`` if Minari takes it as an id, with its version; else a one-line error."""
    if not isinstance(dataset_id, str) or not DATASET_ID_RE.fullmatch(dataset_id) or "//" in dataset_id:
        raise InvalidArgumentError(f"{dataset_id!r} is not a Minari dataset id: (namespace/)name-vN, of letters, "
                                   f"digits, '-' and '_', e.g. tensorgym/conv2d-resnet-r5-landscape/random-v0")
    return dataset_id


# -- rebuilding the env of a dataset --------------------------------------------------------------------------
def make_dataset_env(dataset: Any, **overrides: Any) -> gym.Env:
    """The env a dataset written here was collected from: ``gym.make`` of the id and keywords its metadata
    records (``overrides`` replace or add keywords), for evaluation or replay."""
    meta = dataset.storage.metadata.get(NAMESPACE)
    if not isinstance(meta, Mapping) or "env_id" not in meta:
        raise InvalidArgumentError("the dataset's metadata holds no tensorgym env: it was not written by tensorgym")
    kwargs = dict(meta.get("env_kwargs", {}))
    if isinstance(kwargs.get("target"), Mapping):
        kwargs["target"] = Target.from_json(dict(kwargs["target"]))
    kwargs.update(overrides)
    return gym.make(meta["env_id"], **kwargs)


# -- the collection -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Options:
    """The checked arguments every export shares."""

    episodes: int
    seed: int
    policy: BehaviourPolicy
    steps: int | None
    env_kwargs: dict[str, Any]

    @staticmethod
    def checked(episodes: Any, seed: Any, greedy: Any, steps: Any, env_kwargs: Any) -> "_Options":
        if not _is_int(episodes) or episodes < 1:
            raise InvalidArgumentError(f"episodes must be a positive integer, got {episodes!r}")
        if not _is_int(seed) or seed < 0:
            raise InvalidArgumentError(f"seed must be a non-negative integer, got {seed!r}")
        if steps is not None and (not _is_int(steps) or steps < 1):
            raise InvalidArgumentError(f"steps must be a positive integer (or None: the id's), got {steps!r}")
        kwargs = dict(env_kwargs or {})
        taken = sorted(set(kwargs) & {"backend", "landscape", "db", "max_episode_steps", "context", "measurer",
                                      "evaluator"})
        if taken:
            raise InvalidArgumentError(f"env_kwargs may not set {', '.join(taken)}: the export chooses the backend, "
                                       f"its source and the episode length (steps=)")
        return _Options(int(episodes), int(seed), BehaviourPolicy(greedy), None if steps is None else int(steps),
                        kwargs)


@dataclass(frozen=True)
class _Source:
    """What an export walks: its id tag, its words, its metadata, the keywords that rebuild the env, and the
    recorded throughput of each config (the greedy steps' values)."""

    tag: str
    words: str
    metadata: dict[str, Any]
    env_kwargs: dict[str, Any]
    values: dict[Config, float]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_env_id(env_id: Any) -> None:
    """Refuse an id Gymnasium does not know, in one line, naming the closest tensorgym id."""
    if not isinstance(env_id, str):
        raise InvalidTypeError(f"env_id must be a string, got {type(env_id).__name__}")
    if env_id in gym.registry:
        return
    ours = [i for i, spec in gym.registry.items() if str(spec.entry_point).startswith("tensorgym.")]
    close = difflib.get_close_matches(env_id, ours, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownNameError(f"unknown environment id {env_id!r}{hint}; `tensorgym list` shows the ids")


def _make(env_id: str, options: _Options, **source: Any) -> gym.Env:
    """The env of ``env_id`` with the export's backend; refuses an env that is not the tile-hop env."""
    kwargs = {**options.env_kwargs, **source}
    if options.steps is not None:
        kwargs["max_episode_steps"] = options.steps
    env = gym.make(env_id, **kwargs)
    base = env.unwrapped
    if getattr(base, "space_name", None) != "tiles" or not hasattr(base, "rules"):
        env.close()
        raise InvalidArgumentError(f"{env_id} with these keywords is not the tile-hop env (the tiles space); Minari "
                                   f"datasets are exported from the tile-hop env only")
    return env


def _landscape_source(base: Any, given: str | os.PathLike | None) -> _Source:
    land = base.landscape
    shipped = given is None or (isinstance(given, str) and given == land.cpu_folder)
    if shipped:
        path = find_landscape(base.workload, "tiles", cpu=land.cpu_folder)
        where, file = land.cpu_folder, f"{land.cpu_folder}/{path.name}"
    else:
        path = Path(given).expanduser().resolve()
        where = file = str(path)
    meta = {"kind": "landscape", "cpu_folder": land.cpu_folder, "file": file, "shipped": shipped,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "cpu": land.cpu_label,
            "fingerprint": land.fingerprint, "configs": len(land), "workload_key": land.workload_key,
            "measured": land.metadata.date, "measured_with_tensorgym": land.metadata.tensorgym_version}
    values = dict(zip(land.configs, (float(v) for v in land.scores)))
    words = f"the landscape {file} ({land.cpu_label})"
    return _Source(f"landscape-{land.cpu_folder}", words, meta, {"backend": "landscape", "landscape": where}, values)


def _database_source(base: Any, path: Path) -> _Source:
    workload, target, database = base.workload, base.target, base.database
    records = database.records(workload.key, target.fingerprint, "tiles")
    if not records:
        held = sorted({w.label for w in database.workloads().values()}) if len(database) else []
        also = f"; it holds records of {', '.join(held[:6])}{' ...' if len(held) > 6 else ''}" if held else \
            "; it holds no records"
        raise InvalidArgumentError(f"{path} holds no records of {workload.label} (tiles space) on {target.label}"
                                   f"{also}")
    values: dict[Config, float] = {}
    for record in records:
        values[record.config] = max(values.get(record.config, 0.0), record.score)
    meta = {"kind": "database", "path": str(path), "records": len(records),
            "correct": sum(r.ok for r in records), "configs": len(values), "fingerprint": target.fingerprint,
            "cpu": target.label, "workload_key": workload.key}
    words = f"the database {path} ({len(records)} records on {target.label})"
    return _Source(f"replay-{path.stem}", words, meta, {"backend": "replay", "db": str(path)}, values)


class _StepData:
    """Minari's step-data callback (its ``StepDataCallback`` interface): the step as it is, the info cut to
    the fixed fields of the module docs, the same at the reset and at every step (as Minari requires)."""

    def __call__(self, env: gym.Env, obs: Any, info: dict[str, Any], action: Any = None, rew: Any = None,
                 terminated: Any = None, truncated: Any = None) -> dict[str, Any]:
        return {"observation": obs, "action": action, "reward": rew, "terminated": terminated,
                "truncated": truncated, "info": _kept_info(info)}


def _kept_info(info: Mapping[str, Any]) -> dict[str, Any]:
    def number(value: Any) -> float:
        return math.nan if value is None else float(value)

    return {"action_mask": np.asarray(info["action_mask"], dtype=bool),
            "config": json.dumps(info["config"], sort_keys=True),
            "status": str(info["status"]),
            "gflops": number(info.get("gflops")),
            "best_gflops": number(info.get("best_gflops")),
            "tried_gflops": number(info.get("tried_gflops"))}


def _minari():
    """minari, with what its collector needs (jax), or a one-line :class:`MissingExtra`."""
    try:
        import jax.tree_util  # noqa: F401  (the collector's episode buffers)
        import minari
        import pyarrow  # noqa: F401  (the arrow data format)
    except ImportError as exc:
        raise MissingExtra(f"exporting Minari datasets needs minari 0.5.4 with jax and pyarrow ({exc.name} is "
                           f"missing): {INSTALL_HINT}") from None
    return minari


@contextlib.contextmanager
def _datasets_root(out: str | os.PathLike | None) -> Iterator[Path]:
    """Minari's datasets root (``out``, set as ``MINARI_DATASETS_PATH`` until the block ends, or Minari's own)."""
    old = os.environ.get(DATASETS_PATH_VARIABLE)
    if out is None:
        yield Path(old).expanduser() if old else Path.home() / ".minari" / "datasets"
        return
    root = Path(out).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise InvalidArgumentError(f"{root} is a file; the datasets' root is a directory")
    os.environ[DATASETS_PATH_VARIABLE] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop(DATASETS_PATH_VARIABLE, None)
        else:
            os.environ[DATASETS_PATH_VARIABLE] = old


def _export(env: gym.Env, env_id: str, source: _Source, options: _Options, *, out: str | os.PathLike | None,
            dataset_id: str | None, author: str | None, author_email: str | None, code_permalink: str | None,
            progress: bool) -> MinariExport:
    """Collect the episodes through Minari's DataCollector and write them; closes ``env``."""
    collector = None
    try:
        base = env.unwrapped
        shape = {k: v for k, v in options.env_kwargs.items() if k not in _ENV_KEYWORDS}
        dataset_id = check_dataset_id(dataset_id) if dataset_id is not None else \
            default_dataset_id(env_id, source.tag, options.policy, shape)
        minari = _minari()
        _check_spaces(env)
        with _datasets_root(out) as root:
            if (root / dataset_id).exists():
                raise InvalidArgumentError(f"{root / dataset_id} exists: Minari never overwrites a dataset; name "
                                           f"another id or version")
            collector = minari.DataCollector(env, step_data_callback=_StepData, record_infos=True,
                                             data_format=DATA_FORMAT, jpeg_encoding=False)
            seeds = episode_seeds(options.seed, options.episodes)
            _collect(collector, base, source.values, options.policy, seeds, progress)
            with warnings.catch_warnings():
                # Fields left out on purpose: the collecting env is the evaluation env; no author was given.
                warnings.filterwarnings("ignore", message=r"`\w+` is set to None", category=UserWarning)
                dataset = collector.create_dataset(
                    dataset_id, algorithm_name=options.policy.name, author=author, author_email=author_email,
                    code_permalink=code_permalink, description=_description(env_id, base, source, options),
                    requirements=[f"tensorgym=={_tensorgym_version()}"])
            dataset.storage.update_metadata({NAMESPACE: _metadata_of(env_id, base, source, options, seeds)})
            return MinariExport(dataset_id, root, dataset.total_episodes, dataset.total_steps, source.words,
                                options.policy.name, options.seed)
    finally:
        if collector is not None:
            collector.close()  # closes env too, and removes the collector's temporary folder
        else:
            env.close()


_ENV_KEYWORDS = ("observation", "target", "space", "dtype", "layout", "packing", "render_mode", "max_steps")


def _check_spaces(env: gym.Env) -> None:
    """Refuse, in one line, an observation or action space Minari cannot store."""
    from minari.serialization import serialize_space

    for what, space in (("observation", env.observation_space), ("action", env.action_space)):
        try:
            serialize_space(space)
        except NotImplementedError:
            raise InvalidArgumentError(f"Minari cannot store the env's {what} space {space}") from None


def _collect(collector: gym.Env, base: Any, values: Mapping[Config, float], policy: BehaviourPolicy,
             seeds: Sequence[int], progress: bool) -> None:
    """Run one episode per seed through the collector (it records them)."""
    from tqdm.auto import tqdm

    space, rules = base.search_space, base.rules
    with tqdm(total=len(seeds), desc=f"minari {base.workload.label}", unit="episode", disable=not progress,
              dynamic_ncols=True) as bar:
        for seed in seeds:
            rng = np.random.default_rng([seed, POLICY_STREAM])
            _, info = collector.reset(seed=seed)
            done = False
            while not done:
                config = space.parse(info["config"])

                def value_of(action: int, config: Config = config) -> float:
                    return values.get(rules.move(config, action), 0.0)

                action = policy.act(rng, np.asarray(info["action_mask"], dtype=bool), value_of)
                _, _, terminated, truncated, info = collector.step(action)
                done = terminated or truncated
            bar.update()


def _description(env_id: str, base: Any, source: _Source, options: _Options) -> str:
    return (f"Episodes of tensorgym's tile-hop env {env_id} ({base.workload.label}: {base.workload.describe()}) "
            f"walking {source.words}. Behaviour policy: {options.policy.describe()}. {options.episodes} episodes, "
            f"run seed {options.seed}. Actions move one tiling coordinate one step; the reward is log2 of the "
            f"throughput ratio (-1: a failed kernel). Written by tensorgym {_tensorgym_version()}.")


def _metadata_of(env_id: str, base: Any, source: _Source, options: _Options, seeds: Sequence[int]) -> dict[str, Any]:
    env_kwargs = {**options.env_kwargs, **source.env_kwargs}
    if options.steps is not None:
        env_kwargs["max_episode_steps"] = options.steps
    if isinstance(env_kwargs.get("target"), Target):
        env_kwargs["target"] = env_kwargs["target"].to_json()
    return {
        "env_id": env_id,
        "env_kwargs": json.loads(json.dumps(env_kwargs, default=str)),
        "workload": base.workload.label,
        "workload_key": base.workload.key,
        "target": base.target.label,
        "fingerprint": base.target.fingerprint,
        "observation": getattr(base, "observation", "layer"),
        "source": source.metadata,
        "behaviour_policy": {"name": options.policy.name, "greedy": options.policy.greedy,
                             "description": options.policy.describe(),
                             "greedy_values": "recorded throughput (GFLOP/s) of the config reached"},
        "seed": options.seed,
        "episode_seeds": list(seeds),
        "episode_seed_rule": "numpy.random.SeedSequence(seed).spawn(n)[i].generate_state(1, uint32)[0]",
        "infos": ["action_mask", "config", "status", "gflops", "best_gflops", "tried_gflops"],
        "tensorgym_version": _tensorgym_version(),
        "generator": "tensorgym.dataset.minari_export",
    }


def _tensorgym_version() -> str:
    try:
        return _metadata.version("tensorgym")
    except _metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"
