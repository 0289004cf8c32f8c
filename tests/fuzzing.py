"""Property-based fuzzing of tensorgym's public entry points (hypothesis strategies and a harness).

Each *target* draws a call to a public entry point (a Config, a space method,
``gym.make`` and the env API, the Tuner, agent constructors, the database,
the command line) from values a user could pass, good ones and bad ones
mixed, and returns it as a thunk. :func:`run_isolated` runs the thunk in a
fresh directory (its cwd, ``HOME`` and ``TENSORGYM_DB`` point there; kernels
are "measured" by :class:`fakes.SyntheticMeasurer`, vendor libraries are not
timed) under a time limit, and reports what happened: ``ok``, the exception's
type, or ``hang``; whether the exception is a documented one; and which files
a failing call left behind.

``tests/test_fuzz.py`` asserts on the outcomes; ``tests/tools/fuzz_count.py``
counts them (for before/after figures). Every draw happens before the call,
so a derandomized run sends the same inputs to any version of the code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

class Call:
    """A drawn call: ``fn()``, and a label that says what it is (for reports)."""

    def __init__(self, fn: Callable[[], Any], label: str):
        self.fn, self.label = fn, label
        self.made = False  # set by a call whose first step (which may create files) succeeded

    def __call__(self) -> Any:
        return self.fn()


Thunk = Callable[[], Any]
Target = Callable[[Any, Path], Call]  # (hypothesis data, work dir) -> the call


class Hang(BaseException):
    """A call outlived its time limit (a BaseException, so code under test cannot swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    """What one fuzzed call did."""

    kind: str  # "ok", "hang", or the exception type's name ("exit N" for the command line)
    documented: bool  # ok, or a documented error (a TensorgymError; for the CLI: exit 2 with one line)
    failed: bool
    message: str = ""
    new_files: list[str] = field(default_factory=list)
    call: str = ""  # what was called


def _files(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def documented_error(exc: BaseException) -> bool:
    """A TensorgymError, or an error of Gymnasium's own API contract (e.g. step before reset)."""
    from gymnasium.error import Error as GymError

    from tensorgym.errors import TensorgymError

    return isinstance(exc, (TensorgymError, GymError))


@contextlib.contextmanager
def isolated(work: Path) -> Iterator[None]:
    """cwd, HOME, TENSORGYM_DB and TENSORGYM_CACHE inside ``work``; synthetic measurements; no vendor timing."""
    import tensorgym.baselines as baselines
    import tensorgym.baselines.compare as compare_module
    import tensorgym.envs.base as env_base
    from fakes import SyntheticMeasurer
    from tensorgym.baselines.vendor import VendorUnavailable

    def no_vendor(*args, **kwargs):
        raise VendorUnavailable("vendor libraries are not timed while fuzzing")

    saved_env = {k: os.environ.get(k) for k in ("HOME", "TENSORGYM_DB", "TENSORGYM_CACHE")}
    saved = [(env_base, "Measurer", env_base.Measurer), (compare_module, "Measurer", compare_module.Measurer),
             (compare_module, "time_vendor", compare_module.time_vendor),
             (baselines, "time_vendor", baselines.time_vendor)]
    cwd = os.getcwd()
    os.environ.update(HOME=str(work / "home"), TENSORGYM_DB=str(work / "home" / "default.db"),
                      TENSORGYM_CACHE=str(work / "home" / "cache"))
    env_base.Measurer = SyntheticMeasurer
    compare_module.Measurer = SyntheticMeasurer
    compare_module.time_vendor = no_vendor
    baselines.time_vendor = no_vendor
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(cwd)
        for module, name, value in saved:
            setattr(module, name, value)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_isolated(target: Target, data: Any, *, limit: float = 30.0, cli: bool = False) -> Outcome:
    """Draw a call from ``target`` and run it in a fresh directory (see the module docs)."""
    with tempfile.TemporaryDirectory(prefix="tensorgym-fuzz-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        thunk = target(data, work)
        before = _files(work)
        out, err = io.StringIO(), io.StringIO()
        with isolated(work), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                with time_limit(limit):
                    result = thunk()
            except Hang as exc:
                outcome = Outcome("hang", False, True, str(exc))
            except SystemExit as exc:  # argparse: a usage message and exit code 2
                code = exc.code if isinstance(exc.code, int) else 1
                outcome = Outcome(f"exit {code}", code in (0, 2), code != 0, err.getvalue()[-300:])
            except Exception as exc:  # noqa: BLE001 - classified, not hidden
                outcome = Outcome(type(exc).__name__, documented_error(exc), True, f"{exc}"[:300])
            else:
                if cli:
                    text = err.getvalue()
                    one_line = "Traceback" not in text and len([ln for ln in text.splitlines()
                                                                if ln.startswith("error:")]) == 1
                    outcome = Outcome(f"exit {result}", result in (0, 1) or (result == 2 and one_line),
                                      result == 2, text[-300:])
                else:
                    outcome = Outcome("ok", True, False)
            finally:
                _close_everything()
        if outcome.failed and not getattr(thunk, "made", False):
            outcome.new_files = sorted(_files(work) - before)
        outcome.call = getattr(thunk, "label", "")[:400]
        return outcome


_OPEN: list[Any] = []  # envs and databases a thunk opened: closed after the call


def _close_everything() -> None:
    while _OPEN:
        thing = _OPEN.pop()
        with contextlib.suppress(Exception):
            thing.close()


# -- value pools --------------------------------------------------------------------------------------------------
def junk() -> st.SearchStrategy:
    """Values of every kind a caller might pass by mistake (and some right ones)."""
    return st.one_of(
        st.none(), st.booleans(), st.integers(-3, 100), st.sampled_from([0, -1, 2**40, 99999999999]),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.binary(max_size=3),
        st.lists(st.integers(-2, 70), max_size=5), st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
        st.integers(1, 64).map(np.int64), st.floats(0.5, 100).map(np.float64), st.just(float("nan")),
    )


def ints_or_junk(*good: int) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(list(good)), st.sampled_from(list(good)).map(np.int64), junk())


def _space():
    from tensorgym.spaces import TilesSpace
    from tensorgym.target import local_cpu
    from tensorgym.workloads import conv2d, matmul

    return {"matmul": TilesSpace(matmul(48, 64, 32), local_cpu()),
            "conv": TilesSpace(conv2d(1, 8, 10, 10, 16, 3, 3), local_cpu())}


_SPACES: dict[str, Any] = {}


def spaces() -> dict[str, Any]:
    if not _SPACES:
        _SPACES.update(_space())
    return _SPACES


@st.composite
def config_like(draw, space=None) -> Any:
    """A config of ``space`` (valid, mutated, or not a config at all)."""
    from tensorgym.config import Config

    if space is None:
        return draw(st.one_of(junk(), st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), junk(),
                                                      max_size=3), st.text(max_size=20)))
    config = space.sample(np.random.default_rng(draw(st.integers(0, 1000))))
    how = draw(st.sampled_from(["valid", "valid", "drop", "add", "knob", "tile", "dict", "json", "junk", "list"]))
    values = config.to_json()
    if how == "valid":
        return config
    if how == "drop":
        values.pop(draw(st.sampled_from(sorted(values))))
    elif how == "add":
        values[draw(st.text(min_size=1, max_size=3))] = draw(st.integers(0, 8))
    elif how == "knob":
        values[draw(st.sampled_from(sorted(values)))] = draw(junk())
    elif how == "tile":
        knob = draw(st.sampled_from([k for k, v in values.items() if isinstance(v, list)]))
        tiles = list(values[knob])
        tiles[draw(st.integers(0, len(tiles) - 1))] = draw(st.integers(-2, 100))
        values[knob] = tiles
    elif how == "json":
        return json.dumps(values)
    elif how == "junk":
        return draw(junk())
    elif how == "list":
        return [1, 2]
    if how == "dict":
        return values
    try:
        return Config(values)
    except Exception:  # noqa: BLE001 - not even a Config: pass the dict
        return values


# -- targets ------------------------------------------------------------------------------------------------------
def config_target(data, work: Path) -> Thunk:
    """``Config(...)``, ``Config.from_json``, ``Config.coerce`` and ``replace`` on anything."""
    from tensorgym.config import Config

    how = data.draw(st.sampled_from(["init", "from_json", "coerce", "replace"]))
    value = data.draw(config_like())
    if how == "init":
        return Call(lambda: Config(value), f"Config({value!r})")
    if how == "from_json":
        return Call(lambda: Config.from_json(value), f"Config.from_json({value!r})")
    if how == "coerce":
        return Call(lambda: Config.coerce(value), f"Config.coerce({value!r})")
    change = data.draw(junk())
    return Call(lambda: Config({"a": 1}).replace(a=change), f"Config.replace(a={change!r})")


SPACE_METHODS = ("check", "parse", "encode", "neighbours", "hop_mask", "hop", "features", "scaled_features",
                 "normalised_features", "generic_features", "describe", "info", "candidate_of", "coordinate_index",
                 "kernel_arguments", "sample", "sample_many")


def space_target(data, work: Path) -> Thunk:
    """A method of a tiles space on a valid, mutated or foreign config."""
    space = spaces()[data.draw(st.sampled_from(["matmul", "conv"]))]
    method = data.draw(st.sampled_from(SPACE_METHODS))
    config = data.draw(config_like(space))
    if method == "neighbours":
        hops = data.draw(ints_or_junk(1, 2))
        return Call(lambda: space.neighbours(config, hops), f"{space}.neighbours({config!r}, {hops!r})")
    if method == "hop":
        coordinate, direction = data.draw(ints_or_junk(0, 3, 40)), data.draw(ints_or_junk(1, -1))
        return Call(lambda: space.hop(config, coordinate, direction),
                    f"{space}.hop({config!r}, {coordinate!r}, {direction!r})")
    if method == "coordinate_index":
        return Call(lambda: space.coordinate_index(config, space.coordinates[0]), f"coordinate_index({config!r})")
    if method == "kernel_arguments":
        return Call(lambda: space.builder().kernel_arguments(config, [np.zeros(s, np.float32)
                                                                      for s in space.workload.input_shapes]),
                    f"builder().kernel_arguments({config!r})")
    if method == "sample":
        rng = data.draw(st.one_of(st.integers(0, 9).map(np.random.default_rng), junk()))
        return Call(lambda: space.sample(rng), f"{space}.sample({rng!r})")
    if method == "sample_many":
        rng = data.draw(st.one_of(st.integers(0, 9).map(np.random.default_rng), junk()))
        n = data.draw(ints_or_junk(1, 3))
        return Call(lambda: space.sample_many(rng, n), f"{space}.sample_many({rng!r}, {n!r})")
    return Call(lambda: getattr(space, method)(config), f"{space}.{method}({config!r})")


ENV_IDS = ("Matmul-BERT-M2-v0", "tensorgym/Matmul-v0", "tensorgym/Conv2d-v0", "Conv2d-ResNet-R5-v0", "NoSuch-v0",
           "tensorgym/Matmul-v1")


def db_value(work: Path) -> st.SearchStrategy:
    """A ``db`` argument: paths that work, and every kind that must be refused."""
    return st.sampled_from(["memory", "memory", "new", "new-nested", "", "  ", 5, True, [], b"x.db", "dir",
                            "missing-parent-file", "other-app", "garbage", "future", "malformed", "tensorgym"]
                           ).map(lambda key: _db_fixture(key, work))


def _db_fixture(key: Any, work: Path) -> Any:
    """Turn a fixture name into the value passed (creating the file it names)."""
    if not isinstance(key, str) or key in ("", "  "):
        return key
    path = work / f"{key}.db"
    if key == "memory":
        return ":memory:"
    if key == "new":
        return str(path)
    if key == "new-nested":
        return str(work / "a" / "b" / "r.db")
    if key == "dir":
        path.mkdir()
        return str(path)
    if key == "missing-parent-file":
        (work / "plain").write_text("x")
        return str(work / "plain" / "r.db")  # its "directory" is a file
    if key == "other-app":
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE users (name TEXT)")
            conn.commit()
        return str(path)
    if key == "garbage":
        path.write_bytes(b"not sqlite at all" * 64)
        return str(path)
    if key in ("future", "malformed", "tensorgym"):
        from tensorgym.database import Database

        Database(path).close()
        if key != "tensorgym":
            with contextlib.closing(sqlite3.connect(path)) as conn:
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                             ("99" if key == "future" else "2.1",))
                conn.commit()
        return str(path)
    raise AssertionError(key)


SHAPES = (
    {"M": 48, "N": 64, "K": 32}, {"M": np.int64(48), "N": np.int64(64), "K": 32}, {"M": 99999999999, "N": 1, "K": 1},
    {"M": 0, "N": 1, "K": 1}, {"M": 48.0, "N": 64, "K": 32}, {"M": "48", "N": 64, "K": 32}, {"M": 48, "N": 64},
    {"C": 8, "H": 10, "F": 16, "R": 3}, {"C": np.int32(8), "H": 10, "F": 16, "R": 3, "stride": np.int64(2)},
    {"C": 8, "H": 10, "F": 16, "R": 4}, {"C": 8, "H": 2, "F": 16, "R": 5, "padding": 0}, {"C": 8, "H": 10**9, "F": 8,
                                                                                           "R": 1},
    {"C": 8, "H": 10, "F": 16, "R": 3, "padding": "valid"}, {},
)

ENV_OPTIONS: dict[str, Callable[[Path], st.SearchStrategy]] = {
    "space": lambda w: st.sampled_from(["tiles", "tiles", "metaschedule", "x", 5, None]),
    "target": lambda w: st.sampled_from(["llvm", None, "cuda", "x", 5]),
    "max_steps": lambda w: ints_or_junk(4, 64),
    "render_mode": lambda w: st.sampled_from([None, "ansi", "human", 5]),
    "backend": lambda w: st.sampled_from(["tvm", "tvm", "replay", "x", None, ["tvm"]]),
    "measurer": lambda w: st.sampled_from(["synthetic", "synthetic", "x", 5]),
    "unroll_choices": lambda w: st.sampled_from([(0, 16), [0, 64, 512], "0,16", (), (0, -16), (0, 0), 16,
                                                 (np.int64(0), np.int64(16)), ("a",)]),
    "max_innermost": lambda w: ints_or_junk(16, 64),
    "foo": lambda w: junk(),
}

RESET_OPTIONS = (None, {}, {"config": [1, 2]}, {"config": {"i": 3}}, {"config": "{"}, {"config": "valid"}, 5,
                 {"config": None}, {"other": 1})


def env_target(data, work: Path) -> Thunk:
    """``gym.make(id, **kwargs)``, then reset / step / action_masks / render."""
    import gymnasium as gym

    import tensorgym  # noqa: F401 - registers the ids
    from fakes import SyntheticMeasurer

    env_id = data.draw(st.sampled_from(ENV_IDS))
    kwargs = dict(data.draw(st.sampled_from(SHAPES))) if "/" in env_id else {}
    if not data.draw(st.integers(0, 5)):
        kwargs.update(data.draw(st.sampled_from(SHAPES)))  # a shape given to a fixed layer
    keys = data.draw(st.lists(st.sampled_from(sorted(ENV_OPTIONS)), max_size=3, unique=True))
    for key in keys:
        kwargs[key] = data.draw(ENV_OPTIONS[key](work))
    kwargs["db"] = data.draw(db_value(work)) if data.draw(st.booleans()) else ":memory:"
    if kwargs.get("measurer") == "synthetic" or "measurer" not in kwargs:
        kwargs["measurer"] = SyntheticMeasurer()
    if kwargs.get("backend") == "replay":
        kwargs.pop("measurer")
    seed = data.draw(st.one_of(st.integers(0, 5), junk()))
    options = data.draw(st.sampled_from(RESET_OPTIONS))
    actions = data.draw(st.lists(st.one_of(st.integers(-2, 40), junk()), max_size=3))

    def call():
        env = gym.make(env_id, **kwargs)
        _OPEN.append(env)
        drawn.made = True  # gym.make succeeded: the files it made are not a failing call's
        reset_options = options
        if isinstance(options, dict) and options.get("config") == "valid":
            reset_options = {"config": env.unwrapped.search_space.sample(np.random.default_rng(0)).to_json()}
        env.reset(seed=seed, options=reset_options)
        for action in actions:
            env.step(action)
        env.unwrapped.action_masks()
        env.render()

    drawn = Call(call, f"gym.make({env_id!r}, **{kwargs!r}).reset(seed={seed!r}, options={options!r}); "
                       f"step {actions!r}")
    return drawn


def tuner_target(data, work: Path) -> Thunk:
    """Tuner construction and its methods, with right and wrong arguments."""
    from fakes import synthetic_tuner
    from tensorgym.tuner import Tuner

    space = spaces()["matmul"]
    what = data.draw(st.sampled_from(["init", "measure", "measure", "sample", "neighbours", "seen"]))
    if what == "init":
        budget, time_budget = data.draw(ints_or_junk(1, 8)), data.draw(st.one_of(st.none(), junk()))

        def init():
            tuner = synthetic_tuner(space)
            return Tuner(tuner.evaluator, budget=budget, time_budget=time_budget)

        return Call(init, f"Tuner(budget={budget!r}, time_budget={time_budget!r})")
    if what == "measure":
        kind = data.draw(st.sampled_from(["configs", "dicts", "json-list", "dict", "json", "junk", "mixed"]))
        valid = space.sample_many(np.random.default_rng(data.draw(st.integers(0, 99))), 3)
        arg = {"configs": valid, "dicts": [c.to_json() for c in valid], "json-list": [c.key for c in valid],
               "dict": valid[0].to_json(), "json": valid[0].key}.get(kind)
        if kind == "junk":
            arg = data.draw(junk())
        elif kind == "mixed":
            arg = [valid[0], data.draw(config_like(space))]
        return Call(lambda: synthetic_tuner(space).measure(arg), f"tuner.measure({arg!r})")
    if what == "sample":
        rng = data.draw(st.one_of(st.integers(0, 9).map(np.random.default_rng), st.just("random.Random"), junk()))
        n = data.draw(ints_or_junk(1, 4))

        def sample():
            import random

            return synthetic_tuner(space).sample(random.Random(0) if rng == "random.Random" else rng, n)

        return Call(sample, f"tuner.sample({rng!r}, {n!r})")
    config = data.draw(config_like(space))
    if what == "neighbours":
        hops = data.draw(ints_or_junk(1, 2))
        return Call(lambda: synthetic_tuner(space).neighbours(config, hops), f"tuner.neighbours({config!r}, {hops!r})")
    return Call(lambda: synthetic_tuner(space).seen(config), f"tuner.seen({config!r})")


AGENT_NAMES = ("random", "ga", "dgd", "optuna", "random-structured", "metaschedule", "rnadom", "", "GA")
AGENT_OPTIONS = ("batch_size", "population", "generations", "features", "initial_samples", "num_starts", "window",
                 "tolerance", "sampler", "storage", "n_startup_trials", "max_duplicates", "eps_greedy",
                 "crossover_prob", "mutation_prob", "num_warmup_sample", "model_options", "foo")


def agent_target(data, work: Path) -> Thunk:
    """``make_agent(name, **options)`` and ``agent.tune`` with right and wrong arguments."""
    from tensorgym.catalog import make_agent

    name = data.draw(st.sampled_from(AGENT_NAMES))
    options = {key: data.draw(st.one_of(junk(), st.sampled_from(["af", "generic", "tpe", "random", "x"])))
               for key in data.draw(st.lists(st.sampled_from(AGENT_OPTIONS), max_size=2, unique=True))}
    # MetaSchedule tunes with its own measurer; the microkernel space calibrates a catalogue first.
    tune = name not in ("metaschedule", "random-structured") and data.draw(st.booleans())
    budget = data.draw(ints_or_junk(1, 2))
    time_budget = data.draw(st.one_of(st.none(), st.none(), junk()))
    if budget is None and isinstance(time_budget, (int, float)) and time_budget > 1:
        time_budget = 1.0  # a valid run of that length is not a hang
    seed = data.draw(ints_or_junk(0, 3))
    env_kind = data.draw(st.sampled_from(["env", "env", "string", "none"]))

    def call():
        agent = make_agent(name, **options)
        if not tune:
            return agent
        env = {"string": "Matmul-BERT-M2-v0", "none": None}.get(env_kind)
        if env_kind == "env":
            import gymnasium as gym

            from fakes import SyntheticMeasurer

            env = gym.make("tensorgym/Matmul-v0", M=48, N=64, K=32, db=":memory:", measurer=SyntheticMeasurer(),
                           space=agent.env_space)
            _OPEN.append(env)
        return agent.tune(env, budget=budget, time_budget=time_budget, seed=seed)

    return Call(call, f"make_agent({name!r}, **{options!r})" + (
        f".tune({env_kind}, budget={budget!r}, time_budget={time_budget!r}, seed={seed!r})" if tune else ""))


def database_target(data, work: Path) -> Thunk:
    """``Database(value)``: every kind of path, file and non-path."""
    from tensorgym.database import Database

    value = data.draw(db_value(work))

    def call():
        db = Database(value)
        _OPEN.append(db)
        return len(db)

    return Call(call, f"Database({value!r})")


CLI_OPTIONS: dict[str, dict[str, st.SearchStrategy]] = {
    "tune": {
        "--shape": st.sampled_from(["M=48,N=64,K=32", "M=99999999999,N=1,K=1", "M64", "", "M=x,N=1,K=1",
                                    "C=8,H=10,F=16,R=3", "M=0,N=1,K=1", "M=48,N=64"]),
        "--agent": st.sampled_from(["random", "ga", "dgd", "optuna", "rnadom", "", "metaschedule"]),
        "--space": st.sampled_from(["tiles", "x", ""]),
        "--features": st.sampled_from(["af", "generic", "x"]),
        "--budget": st.sampled_from(["1", "2", "0", "-1", "nan", "x", ""]),
        "--time-budget": st.sampled_from(["nan", "inf", "-1", "0", "1e9", "x", "-inf"]),
        "--seed": st.sampled_from(["0", "-1", "x", "3"]),
        "--json": st.sampled_from(["run.json", "", "adir"]),
    },
    "compare": {
        "--shape": st.sampled_from(["M=48,N=64,K=32", "M=99999999999,N=1,K=1", "M64", ""]),
        "--agents": st.sampled_from(["random", "random,optuna", "rnadom", "", ",", "random,random"]),
        "--budget": st.sampled_from(["1", "2", "0", "-1", "x"]),
        "--time-budget": st.sampled_from(["nan", "inf", "-1", "1e9", "x"]),
        "--seeds": st.sampled_from(["1", "0", "-1", "0,0", "x", "", "0,1"]),
        "--out": st.sampled_from(["out", "", "afile", "adir"]),
        "--trial-points": st.sampled_from(["1,2", "x", "", "-1", "0"]),
        "--time-points": st.sampled_from(["1", "nan", "1,x", "", "-5"]),
        "--remeasure": st.sampled_from(["0", "1", "-1", "x"]),
    },
    "microkernels show": {
        "--threshold": st.sampled_from(["0.8", "nan", "-1", "x", "2"]),
        "--cache-dir": st.sampled_from(["cache", "", "afile"]),
    },
}
CLI_FLAGS = {"tune": ("--no-vendor", "-q"), "compare": ("--no-vendor", "--no-plot", "-q"),
             "microkernels show": ("--all",)}
CLI_ENV_IDS = ("Matmul-BERT-M2-v0", "tensorgym/Matmul-v0", "CartPole-v1", "NoSuch-v0", "", "Conv2d-ResNet-R5-v0")


def cli_target(data, work: Path) -> Thunk:
    """``tensorgym ...`` argument lists: every subcommand, right and wrong values mixed."""
    from tensorgym.cli import main

    command = data.draw(st.sampled_from(["tune", "tune", "compare", "show", "microkernels show", "list", "bogus"]))
    argv = command.split()
    if command in ("tune", "compare"):
        argv += list(data.draw(st.lists(st.sampled_from(CLI_ENV_IDS), min_size=1, max_size=2 if command == "compare"
                                        else 1)))
    if command == "show":
        argv.append(data.draw(db_value(work).map(lambda v: v if isinstance(v, str) else str(v))))
    if command == "list":
        argv += data.draw(st.sampled_from([[], ["--suite", "BERT"], ["--suite", "x"], ["--suite", ""]]))
    for option, values in CLI_OPTIONS.get(command, {}).items():
        if data.draw(st.integers(0, 2)) == 0:
            value = data.draw(values)
            if value in ("afile", "adir"):
                path = work / value
                path.mkdir() if value == "adir" else path.write_text("x")
                value = str(path)
            argv += [option, value]
    for flag in CLI_FLAGS.get(command, ()):
        if data.draw(st.integers(0, 3)):
            argv.append(flag)
    if command in ("tune", "compare"):
        if data.draw(st.booleans()):
            db = data.draw(db_value(work))
            argv += ["--db", db if isinstance(db, str) else str(db)]
        if command == "tune" and "--budget" not in argv:
            argv += ["--budget", "2"]  # the default (64) is a long run even on synthetic kernels
        if command == "compare":
            # The default agents include MetaSchedule's own tuner: a real run of minutes.
            argv += [] if "--agents" in argv else ["--agents", "random"]
            argv += [] if "--budget" in argv else ["--budget", "2"]
            argv += [] if "--seeds" in argv else ["--seeds", "1"]
            argv += [] if "--out" in argv else ["--out", str(work / "out")]
    return Call(lambda: main(argv), "tensorgym " + " ".join(map(repr, argv)))


TARGETS: dict[str, Target] = {
    "config": config_target, "space": space_target, "env": env_target, "tuner": tuner_target,
    "agent": agent_target, "database": database_target, "cli": cli_target,
}
