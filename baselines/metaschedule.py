"""TVM MetaSchedule as a peer: its own tuner on the same workload, re-timed by tensorgym's measurer.

:class:`MetaScheduleAgent` (``"metaschedule"``) runs ``tvm.s_tir.meta_schedule``
the way its users do (``ms.tune_tir``: post-order-apply design space,
evolutionary search, XGBoost cost model, LocalBuilder/LocalRunner) with the
same trial budget as tensorgym's agents (``max_trials_global = budget``,
``num_trials_per_iter = min(64, budget)``), then re-times MetaSchedule's best
schedules with tensorgym's :class:`~tensorgym.measure.Measurer`, so that its
numbers are checked against NumPy, timed with tensorgym's protocol and stored
in the tensorgym database like every other agent's.

**Isolation.** MetaSchedule runs in its own worker process (a
:class:`~tensorgym.measure.worker.Worker`), never in the process that holds
the environment: it trains XGBoost and starts popen pools, and a kernel
timed in the process that trains XGBoost was once 25 % slow
(shared/notes/tvm_probe.md, B7). That process, and the popen workers it
starts, get ``TVM_NUM_THREADS`` = the core count, so MetaSchedule times its
kernels on every core like tensorgym and the vendor libraries do; the
target carries ``num-cores``. MetaSchedule's logs go to files in its work
directory; the caller sees a progress bar.

**Import time (B4).** The first import of ``tvm.s_tir.tensor_intrin``
(which ``TuneContext`` triggers) takes 20-30 s, because each of its ~500
TVMScript functions calls ``inspect.stack()``, which resolves the module of
every frame of the stack. The TVMScript parser only reads the frame objects
and the source line of the first few frames, so
:func:`install_fast_tvmscript_stack` gives it a stack without module
resolution (3 s instead of 30 s). It is installed in the MetaSchedule
process, in its builder/runner popen workers (``initializer=``), and in
tensorgym's build workers before they regenerate a design space.

**The** ``metaschedule`` **space.** To store MetaSchedule's schedules as
tensorgym records they need configs: :class:`MetaScheduleSpace` has one
config per (design space, sampling decisions) of MetaSchedule's design
spaces for the workload: ``{"space": 1, "k00_tile": [4, 1, 8, 2], ...,
"k03_par": 32, "k04_cat": 2, "k05_loc": -1}`` where ``tile`` is a
SamplePerfectTile decision, ``cat`` a SampleCategorical decision (the index
of the candidate, e.g. of the unroll depth), ``loc`` a SampleComputeLocation
decision and ``par`` the value of the ``meta_schedule.parallel`` annotation
(the one non-decision that MetaSchedule's MutateParallel changes).
``apply`` replays that design space's trace with those decisions and runs
MetaSchedule's postprocessors. A measured MetaSchedule trace is matched to
its design space by comparing the simplified traces, and the match is
checked by structural equality of the scheduled modules before re-timing.

**Budget and results.** MetaSchedule's own trials are the budget. The
:class:`~tensorgym.tuner.TuningResult`'s timeline is MetaSchedule's own
measurements in the order their results were known, with MetaSchedule's
latencies (the mean of its ``run_secs``) and its elapsed wall time, so
best-at-N-trials and best-at-T-seconds are meaningful; the elapsed time of
a trial is when its run finished (failed builds: when the batch's builds
finished). The re-timing of the best ``top_k`` configs is extra, not charged
to the budget: ``best_gflops`` / ``best_config`` / ``best_latency_*`` are
the best *re-timed* record (the number to headline), and
``extra["metaschedule_best_gflops"]`` is MetaSchedule's own best. A
``time_budget`` stops MetaSchedule after the batch in which it runs out.

**Resume.** Each run works in a directory beside the tensorgym database
(``<db>.metaschedule/<workload>/seed<S>-budget<B>``); a finished run leaves
``result.json`` there and a re-run reuses it (the re-timing is then answered
by the tensorgym database). An interrupted MetaSchedule run is started again
from scratch: ``tune_tir`` cannot resume a search.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import linecache
import logging
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from math import prod
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..agents.base import Agent, tuning_env
from ..evaluator import Evaluator
from ..measure.worker import Worker
from ..record import Record
from ..spaces.base import Config, Space, SpaceError
from ..spaces.tiles import factorizations
from ..target import Target
from ..text import slug
from ..tuner import Trial, TuningResult, check_budget
from ..workloads import Workload

log = logging.getLogger(__name__)

TRIALS_PER_ITER = 64  # MetaSchedule's default batch
_PARALLEL_KEY = "meta_schedule.parallel"
_SAMPLING = {"SamplePerfectTile": "tile", "SampleCategorical": "cat", "SampleComputeLocation": "loc"}
_ROOT_LOCATIONS = (-2, -1)  # compute inline / at the root: valid whatever the tiles


# -- B4: a cheap stack for the TVMScript parser ---------------------------------------------------------------
def _stack_without_modules(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack()`` minus its per-frame module lookup: source lines only for the innermost frames."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        lines = [linecache.getline(code.co_filename, frame.f_lineno)] if len(frames) < 4 else None
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, lines,
                                        0 if lines else None))
        frame = frame.f_back
    return frames


class _InspectForTVMScript(types.ModuleType):
    """The ``inspect`` module as the TVMScript parser sees it: everything as usual but ``stack``."""

    def __init__(self) -> None:
        super().__init__("inspect")
        self.stack = _stack_without_modules

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)


def install_fast_tvmscript_stack() -> None:
    """Make TVMScript's ``@T.prim_func`` cheap to define in this process (idempotent; imports TVM)."""
    import tvm.tirx.script.parser.entry as entry

    if not isinstance(entry.inspect, _InspectForTVMScript):
        entry.inspect = _InspectForTVMScript()


def popen_initializer() -> None:
    """``initializer=`` of MetaSchedule's LocalBuilder/LocalRunner: their popen workers import TVM anew."""
    install_fast_tvmscript_stack()


# -- design spaces --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Knob:
    """One coordinate of a MetaSchedule design space (see the module docs)."""

    name: str  # e.g. "k00_tile"
    kind: str  # "tile", "cat", "loc" or "par"
    parts: int = 0  # tile: number of factors
    product: int = 0  # tile: the loop extent
    max_innermost: int = 0  # tile: the largest innermost factor
    choices: tuple[int, ...] = ()  # cat: the candidate values
    default: int = 0  # par: the design space's value

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = list(self.choices)
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Knob":
        return Knob(**{**data, "choices": tuple(data.get("choices", ()))})


Signature = tuple[tuple[Knob, ...], ...]  # the knobs of each design space


def signature_digest(signature: Signature) -> str:
    text = json.dumps([[k.to_json() for k in knobs] for knobs in signature], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _knob_instructions(trace) -> list:
    """The instructions that carry a knob, in trace order (the part before the postprocessors)."""
    out = []
    for inst in trace.insts:
        name = inst.kind.name
        if name == "EnterPostproc":
            break
        if name in _SAMPLING or (name == "Annotate" and str(inst.attrs[0]) == _PARALLEL_KEY):
            out.append(inst)
    return out


def _int(value: Any) -> int:
    return int(value.value) if hasattr(value, "value") else int(value)


def _knobs_of(trace) -> tuple[Knob, ...]:
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        if inst in trace.decisions and inst.kind.name not in _SAMPLING:
            raise NotImplementedError(f"MetaSchedule's design space uses {inst.kind.name}, which the metaschedule "
                                      f"space cannot express (it knows {sorted(_SAMPLING)})")
    knobs = []
    for i, inst in enumerate(_knob_instructions(trace)):
        name = inst.kind.name
        if name == "Annotate":
            knobs.append(Knob(f"k{i:02d}_par", "par", default=_int(inst.inputs[1])))
            continue
        kind = _SAMPLING[name]
        if kind == "tile":
            decision = [_int(v) for v in trace.decisions[inst]]
            knobs.append(Knob(f"k{i:02d}_tile", "tile", parts=_int(inst.attrs[0]), product=prod(decision),
                              max_innermost=_int(inst.attrs[1])))
        elif kind == "cat":
            knobs.append(Knob(f"k{i:02d}_cat", "cat", choices=tuple(_int(c) for c in inst.attrs[0])))
        else:
            knobs.append(Knob(f"k{i:02d}_loc", "loc"))
    return tuple(knobs)


def _knob_values(trace) -> list[Any]:
    """The knob values of a (design-space or tuned) trace, in trace order."""
    values = []
    for inst in _knob_instructions(trace):
        if inst.kind.name == "Annotate":
            values.append(_int(inst.inputs[1]))
        elif inst.kind.name == "SamplePerfectTile":
            values.append(tuple(_int(v) for v in trace.decisions[inst]))
        else:
            values.append(_int(trace.decisions[inst]))
    return values


def _with_values(trace, values: Sequence[Any]):
    """``trace`` with its knob instructions set to ``values`` (postprocessors dropped)."""
    import tvm
    from tvm.s_tir.schedule import Instruction, Trace

    remaining = iter(values)
    insts, decisions = [], {}
    for inst in trace.insts:
        name = inst.kind.name
        if name == "EnterPostproc":
            break
        if name in _SAMPLING:
            value = next(remaining)
            decisions[inst] = list(value) if isinstance(value, tuple) else int(value)
        elif name == "Annotate" and str(inst.attrs[0]) == _PARALLEL_KEY:
            value = tvm.tirx.IntImm("int32", int(next(remaining)))
            inst = Instruction(inst.kind, [inst.inputs[0], value], inst.attrs, inst.outputs)
        insts.append(inst)
    return Trace(insts, decisions)


def _trace_text(trace) -> str:
    return "\n".join(trace.simplified(remove_postproc=True).as_python())


class _Design:
    """MetaSchedule's design spaces of one workload on one target, in this process (needs TVM)."""

    def __init__(self, workload: Workload, target: Target):
        install_fast_tvmscript_stack()
        import tvm
        from tvm.s_tir import meta_schedule as ms

        self.mod = tvm.IRModule({"main": workload.te_func()})
        context = ms.TuneContext(mod=self.mod, target=target.tvm_target(), space_generator="post-order-apply",
                                 task_name="main", num_threads=target.num_cores)
        self.traces = [sch.trace for sch in context.generate_design_space()]
        self.postprocs = list(context.space_generator.postprocs)
        self.signature: Signature = tuple(_knobs_of(t) for t in self.traces)
        self.digest = signature_digest(self.signature)

    def schedule(self, config: Config):
        """Replay the config's design space with its knobs, then MetaSchedule's postprocessors."""
        import tvm

        index = int(config["space"])
        knobs = self.signature[index]
        trace = _with_values(self.traces[index], [config[k.name] for k in knobs])
        sch = tvm.s_tir.Schedule(self.mod)
        trace.apply_to_schedule(sch, remove_postproc=True)
        # Replaying snaps an invalid compute location to a valid one; a config must name the schedule it gets.
        replayed = _knob_values(sch.trace)
        for knob, asked, got in zip(knobs, (config[k.name] for k in knobs), replayed):
            if knob.kind == "loc" and asked != got:
                raise SpaceError(f"{knob.name}: compute location {asked} is not valid with these tiles "
                                 f"(MetaSchedule would use {got})")
        sch.enter_postproc()
        for postproc in self.postprocs:
            if not postproc.apply(sch):
                raise SpaceError(f"MetaSchedule's postprocessor {type(postproc).__name__} rejects this config")
        return sch

    def config_of(self, trace) -> Config | None:
        """The config of a trace MetaSchedule measured (None if it matches no design space)."""
        values = _knob_values(trace)
        text = _trace_text(trace)
        for index, (knobs, design) in enumerate(zip(self.signature, self.traces)):
            if len(knobs) != len(values) or any(
                    (k.kind == "tile") != isinstance(v, tuple) for k, v in zip(knobs, values)):
                continue
            if _trace_text(_with_values(design, values)) == text:
                return Config({"space": index, **{k.name: v for k, v in zip(knobs, values)}})
        return None


@lru_cache(maxsize=4)
def _design(workload: Workload, target: Target) -> _Design:
    """One per process and workload: build workers regenerate the design spaces once, not per config."""
    return _Design(workload, target)


def _signature_here(workload: Workload, target: Target) -> list[list[dict[str, Any]]]:
    """Runs in a worker: the design-space signature as JSON."""
    return [[k.to_json() for k in knobs] for knobs in _design(workload, target).signature]


def _signature_from_json(data: Sequence[Sequence[dict[str, Any]]]) -> Signature:
    return tuple(tuple(Knob.from_json(k) for k in knobs) for knobs in data)


def design_signature(workload: Workload, target: Target, timeout: float = 300.0) -> Signature:
    """MetaSchedule's design-space signature of a workload, computed in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="tensorgym-ms-") as logs:
        worker = Worker("metaschedule-space", logs, env={"TVM_NUM_THREADS": str(target.num_cores)}, preload=())
        try:
            outcome = worker.call(f"{__name__}:_signature_here", workload, target, timeout=timeout)
        finally:
            worker.close()
    if not outcome.ok:
        raise RuntimeError(f"generating MetaSchedule's design space for {workload.label} failed "
                           f"({outcome.kind}): {outcome.error[:800]}")
    return _signature_from_json(outcome.value)


class MetaScheduleSpace(Space):
    """MetaSchedule's design spaces of a workload as a tensorgym space (see the module docs).

    Args:
        workload, target: as for every space (LLVM CPU targets).
        signature: the design spaces' knobs; computed in a subprocess on first
            use when omitted (MetaSchedule's tuning job returns it).

    The space regenerates the design spaces lazily in the process that calls
    :meth:`apply` (once per process) and refuses to apply configs if they no
    longer have the signature the configs were made for. :meth:`neighbours`
    is not offered: MetaSchedule's own neighbourhood is its mutators', which
    need the design space's TVM objects, so agents that hop do so in the
    ``tiles`` space.
    """

    name = "metaschedule"

    def __init__(self, workload: Workload, target: Target, signature: Signature | None = None):
        super().__init__(workload, target)
        if target.kind != "llvm":
            raise SpaceError(f"the metaschedule space is implemented for LLVM CPUs; got target kind {target.kind!r}")
        self._signature = signature

    def __getstate__(self):
        return {"workload": self.workload, "target": self.target, "signature": self.signature}

    def __setstate__(self, state):
        self.__init__(state["workload"], state["target"], state["signature"])

    @property
    def signature(self) -> Signature:
        if self._signature is None:
            self._signature = design_signature(self.workload, self.target)
        return self._signature

    # -- validity ------------------------------------------------------------
    def check(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise SpaceError(f"expected a Config, got {type(config).__name__}")
        spaces = self.signature
        index = config.get("space")
        if not isinstance(index, int) or not 0 <= index < len(spaces):
            raise SpaceError(f"knob 'space' must be a design-space index in [0, {len(spaces)}), got {index!r}")
        knobs = spaces[index]
        expected = {"space", *(k.name for k in knobs)}
        if set(config) != expected:
            raise SpaceError(f"design space {index} of {self.workload.label} has knobs {sorted(expected)}; "
                             f"got {sorted(config)}")
        for knob in knobs:
            value = config[knob.name]
            if knob.kind == "tile":
                if (not isinstance(value, tuple) or len(value) != knob.parts or min(value) < 1
                        or prod(value) != knob.product or value[-1] > knob.max_innermost):
                    raise SpaceError(f"{knob.name} must be {knob.parts} positive factors of {knob.product}, the "
                                     f"last <= {knob.max_innermost}; got {value!r}")
            elif not isinstance(value, int):
                raise SpaceError(f"{knob.name} must be an int, got {value!r}")
            elif knob.kind == "cat" and not 0 <= value < len(knob.choices):
                raise SpaceError(f"{knob.name} is an index into {list(knob.choices)}, got {value}")
            elif knob.kind == "loc" and value < -2:
                raise SpaceError(f"{knob.name} is a compute location >= -2, got {value}")
            elif knob.kind == "par" and value < 1:
                raise SpaceError(f"{knob.name} is a positive parallel extent, got {value}")

    # -- sampling --------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        """A random config: uniform design space, tile factorisations and categorical choices.

        Compute locations are drawn from inline/root only: which loops are
        valid locations depends on the tiles and is known only by replaying
        the trace. The parallel extent keeps the design space's value.
        """
        index = int(rng.integers(len(self.signature)))
        values: dict[str, Any] = {"space": index}
        for knob in self.signature[index]:
            if knob.kind == "tile":
                options = factorizations(knob.product, knob.parts, knob.max_innermost)
                values[knob.name] = options[int(rng.integers(len(options)))]
            elif knob.kind == "cat":
                values[knob.name] = int(rng.integers(len(knob.choices)))
            elif knob.kind == "loc":
                values[knob.name] = _ROOT_LOCATIONS[int(rng.integers(len(_ROOT_LOCATIONS)))]
            else:
                values[knob.name] = knob.default
        return Config(values)

    def neighbours(self, config: Config, hops: int = 1) -> list[Config]:
        raise NotImplementedError("the metaschedule space has no hop neighbourhood (MetaSchedule's mutators are "
                                  "its neighbourhood); hop in the tiles space instead")

    # -- encoding ----------------------------------------------------------------
    @property
    def encoding_size(self) -> int:
        return 1 + max(sum(k.parts if k.kind == "tile" else 1 for k in knobs) for knobs in self.signature)

    def encode(self, config: Config) -> np.ndarray:
        """Design-space index, then per knob: log-tile shares, categorical index, location, parallel extent."""
        out = np.zeros(self.encoding_size, dtype=np.float32)
        index = int(config["space"])
        out[0] = index / max(1, len(self.signature) - 1)
        i = 1
        for knob in self.signature[index]:
            value = config[knob.name]
            if knob.kind == "tile":
                scale = np.log2(knob.product) if knob.product > 1 else 1.0
                out[i:i + knob.parts] = np.log2(np.asarray(value, dtype=np.float64)) / scale
                i += knob.parts
                continue
            if knob.kind == "cat":
                out[i] = value / max(1, len(knob.choices) - 1)
            elif knob.kind == "loc":
                out[i] = min(1.0, (value + 2) / 32)
            else:
                out[i] = min(1.0, np.log2(value) / (2 * np.log2(max(2, knob.default))))
            i += 1
        return out

    def describe(self, config: Config) -> str:
        parts = [f"space={config['space']}"]
        for knob in self.signature[int(config["space"])]:
            value = config[knob.name]
            if knob.kind == "tile":
                parts.append(f"{knob.name}={'x'.join(map(str, value))}")
            elif knob.kind == "cat":
                parts.append(f"{knob.name}={knob.choices[value]}")
            else:
                parts.append(f"{knob.name}={value}")
        return " ".join(parts)

    # -- schedule ------------------------------------------------------------------
    def apply(self, config: Config):
        self.check(config)
        design = _design(self.workload, self.target)
        if design.digest != signature_digest(self.signature):
            raise SpaceError("MetaSchedule's design spaces in this process differ from those this space was made "
                             "with (another TVM version or target?)")
        return design.schedule(config).mod


# -- the tuning job (runs in its own process) -------------------------------------------------------------------
def _status(build_error: str | None, run_error: str | None) -> str:
    if build_error:
        return "timeout" if "Timeout" in build_error else "build_error"
    if run_error:
        return "timeout" if "Timeout" in run_error else "runtime_error"
    return "ok"


def _tune_here(workload: Workload, target: Target, budget: int, seed: int, work_dir: str,
               time_budget: float | None, trials_per_iter: int, build_timeout: float, run_timeout: float,
               top_k: int) -> dict[str, Any]:
    """Runs in the MetaSchedule worker: ``tune_tir`` with a recorder, then the trials as configs."""
    install_fast_tvmscript_stack()
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    design = _design(workload, target)
    progress_path = Path(work_dir) / "progress.jsonl"
    progress_path.write_text("")
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    local_runner = ms.runner.LocalRunner(
        timeout_sec=run_timeout, initializer=popen_initializer,
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100,
                                                   enable_cpu_cache_flush=False))

    @derived_object
    class TimedRunner(ms.runner.PyRunner):
        """LocalRunner, one candidate at a time, noting when each result is known."""

        def __init__(self) -> None:
            super().__init__()
            self.batches: list[tuple[float, list[float]]] = []  # (builds finished, each run finished)

        def run(self, runner_inputs):
            done: list[float] = []
            self.batches.append((clock(), done))
            futures = []
            for runner_input in runner_inputs:
                futures.extend(local_runner.run([runner_input]))
                done.append(clock())
            return futures

    runner = TimedRunner()
    trials: list[dict[str, Any]] = []
    traces: list[Any] = []

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        """Keeps every measured candidate with the time its result was known; enforces the time budget."""

        def __init__(self) -> None:
            super().__init__()
            self.batches_seen = 0
            self.best = 0.0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            now = clock()
            new_batches = runner.batches[self.batches_seen:]
            self.batches_seen = len(runner.batches)
            builds_done = new_batches[0][0] if new_batches else now
            run_times = iter([t for _, times in new_batches for t in times])
            batch = []
            for candidate, built, ran in zip(measure_candidates, builder_results, runner_results):
                elapsed = builds_done if built.error_msg else next(run_times, now)
                secs = [float(_value(s)) for s in ran.run_secs] if ran.run_secs else []
                status = _status(built.error_msg, ran.error_msg)
                latency = float(np.mean(secs)) if status == "ok" and secs else None
                error = (built.error_msg or ran.error_msg or "")[:2000]
                batch.append(({"elapsed_s": elapsed, "status": status, "latency_s": latency, "error": error},
                              candidate.sch.trace))
            batch.sort(key=lambda item: item[0]["elapsed_s"])  # the order results were known in
            for entry, trace in batch:
                trials.append(entry)
                traces.append(trace)
                if entry["latency_s"]:
                    self.best = max(self.best, workload.gflops(entry["latency_s"]))
            with progress_path.open("a") as f:
                f.write(json.dumps({"trials": len(trials), "best_gflops": self.best, "elapsed_s": now}) + "\n")
            if time_budget is not None and now >= time_budget:
                task_scheduler.terminate_task(task_id)

    ms.tune_tir(
        mod=design.mod, target=target.tvm_target(), work_dir=work_dir, max_trials_global=budget,
        num_trials_per_iter=min(trials_per_iter, budget),
        builder=ms.builder.LocalBuilder(max_workers=target.num_cores, timeout_sec=build_timeout,
                                        initializer=popen_initializer),
        runner=runner, database=ms.database.JSONDatabase(work_dir=work_dir), cost_model="xgb",
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), Recorder()],
        num_tuning_cores=target.num_cores, seed=seed,
    )
    tune_s = clock()

    unmatched = 0
    for entry, trace in zip(trials, traces):
        config = design.config_of(trace)
        entry["config"] = config.to_json() if config is not None else None
        unmatched += config is None
    # Check that the configs to be re-timed rebuild exactly the kernels MetaSchedule measured.
    verified, mismatched = [], []
    ranked = sorted((i for i, e in enumerate(trials) if e["latency_s"] and e["config"]),
                    key=lambda i: trials[i]["latency_s"])
    for i in ranked:
        if len(verified) >= top_k:
            break
        config = Config.from_json(trials[i]["config"])
        if config.to_json() in [trials[j]["config"] for j in verified]:
            continue
        original = tvm.s_tir.Schedule(design.mod)
        traces[i].apply_to_schedule(original, remove_postproc=False)
        try:
            same = _structural_equal(design.schedule(config).mod, original.mod)
        except SpaceError:
            same = False
        (verified if same else mismatched).append(i)
    return {
        "signature": [[k.to_json() for k in knobs] for knobs in design.signature], "trials": trials,
        "tune_s": tune_s, "design_spaces": len(design.traces), "unmatched": unmatched, "top": verified,
        "mismatched": mismatched, "tvm": tvm.__version__,
    }


def _value(x: Any) -> float:
    return x.value if hasattr(x, "value") else x


def _structural_equal(a, b) -> bool:
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b))


# -- the agent -------------------------------------------------------------------------------------------------
@dataclass
class MetaScheduleRun:
    """What one MetaSchedule tuning job produced (``result.json`` in its work directory)."""

    signature: Signature
    trials: list[dict[str, Any]]  # elapsed_s, status, latency_s, error, config (JSON or None)
    tune_s: float
    top: list[int]  # indices of the trials to re-time (best first, verified)
    work_dir: str
    info: dict[str, Any] = field(default_factory=dict)


class MetaScheduleAgent(Agent):
    """TVM MetaSchedule on the env's workload, as a peer of tensorgym's agents (see the module docs).

    Args:
        work_dir: where MetaSchedule's runs keep their logs, database and
            results (default: ``<tensorgym db>.metaschedule/``; a temporary
            directory for an in-memory database).
        top_k: how many of MetaSchedule's best schedules to re-time.
        trials_per_iter: MetaSchedule's batch size (capped by the budget).
        build_timeout, run_timeout: MetaSchedule's builder and runner timeouts (seconds per candidate).
        timeout: seconds the whole MetaSchedule job may take (default: scaled with budget and workload).
        reuse: reuse a finished run found in the work directory.

    The agent works in any env of a conv2d or matmul on the local CPU: it
    ignores the env's search space (MetaSchedule searches its own) but uses
    its workload, target, database and measurer.
    """

    name = "metaschedule"
    spaces = ("tiles", "microkernel", "metaschedule")

    def __init__(self, work_dir: str | Path | None = None, top_k: int = 3, trials_per_iter: int = TRIALS_PER_ITER,
                 build_timeout: float = 30.0, run_timeout: float = 30.0, timeout: float | None = None,
                 reuse: bool = True):
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        if trials_per_iter < 1:
            raise ValueError(f"trials_per_iter must be >= 1, got {trials_per_iter}")
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.top_k = top_k
        self.trials_per_iter = trials_per_iter
        self.build_timeout = build_timeout
        self.run_timeout = run_timeout
        self.timeout = timeout
        self.reuse = reuse

    def search(self, tuner, rng):
        raise NotImplementedError("MetaSchedule runs its own search with its own measurements; use "
                                  "MetaScheduleAgent.tune(env, ...), which returns its TuningResult")

    # -- tune ------------------------------------------------------------------------
    def tune(self, env: gym.Env, budget: int | None = 64, time_budget: float | None = None, seed: int = 0,
             progress: bool = False) -> TuningResult:
        """Run MetaSchedule on ``env``'s workload, then re-time its best schedules into ``env``'s database."""
        check_budget(budget, time_budget)
        base = tuning_env(env)
        workload, target = base.workload, base.target
        if target.kind != "llvm":
            raise ValueError(f"the metaschedule agent tunes LLVM CPU targets, not {target.kind!r}")
        started = time.monotonic()
        db_path = getattr(base.database, "path", ":memory:")
        temporary = None
        if self.work_dir is not None:
            root = self.work_dir
        elif db_path != ":memory:":
            root = Path(f"{db_path}.metaschedule")
        else:
            root = Path(temporary := tempfile.mkdtemp(prefix="tensorgym-metaschedule-"))
        key = hashlib.sha256(f"{workload.key}|{target.fingerprint}".encode()).hexdigest()[:10]
        run_name = f"seed{seed}-budget{budget}" + (f"-time{time_budget:g}" if time_budget else "")
        work_dir = root / f"{slug(workload.label)}-{key}" / run_name
        try:
            run = self.run_metaschedule(workload, target, work_dir, budget=budget, time_budget=time_budget,
                                        seed=seed, progress=progress)
            evaluator = Evaluator(MetaScheduleSpace(workload, target, run.signature), base.database,
                                  base.evaluator.measurer)
            return self._result(run, evaluator, seed, budget, time_budget, time.monotonic() - started)
        finally:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)

    def run_metaschedule(self, workload: Workload, target: Target, work_dir: str | Path, *, budget: int | None,
                         time_budget: float | None, seed: int, progress: bool = False) -> MetaScheduleRun:
        """Tune ``workload`` with MetaSchedule in a fresh process (or reuse the finished run in ``work_dir``)."""
        work_dir = Path(work_dir)
        done = work_dir / "result.json"
        if self.reuse and done.exists():
            try:
                data = json.loads(done.read_text())
                log.info("reusing the finished MetaSchedule run in %s", work_dir)
                return self._run_from_json(data, work_dir)
            except (json.JSONDecodeError, KeyError, TypeError):
                log.warning("ignoring the unreadable %s", done)
        shutil.rmtree(work_dir, ignore_errors=True)  # an interrupted run cannot be resumed: start again
        work_dir.mkdir(parents=True)
        trials = budget if budget is not None else 100_000  # time budget only: MetaSchedule stops on the clock
        if self.timeout is not None:
            timeout = self.timeout
        elif budget is not None:
            timeout = 600.0 + budget * (5.0 + 20.0 * workload.gflop)
        else:
            timeout = 600.0 + 2.0 * time_budget
        worker = Worker("metaschedule", work_dir, env={"TVM_NUM_THREADS": str(target.num_cores)}, preload=())
        log.info("MetaSchedule on %s: %s trials, logs in %s", workload.label, budget, work_dir)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=budget, desc=f"{self.name} {workload.label}", unit="trial", dynamic_ncols=True)
        try:
            worker.submit(f"{__name__}:_tune_here", workload, target, trials, seed, str(work_dir), time_budget,
                          self.trials_per_iter, self.build_timeout, self.run_timeout, self.top_k)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                conn = worker.connection
                if conn is None or conn.poll(2.0):
                    break
                if bar is not None:
                    _update_bar(bar, work_dir / "progress.jsonl")
            outcome = worker.collect(max(0.0, deadline - time.monotonic()))
            if bar is not None:
                _update_bar(bar, work_dir / "progress.jsonl")
        finally:
            worker.close()
            if bar is not None:
                bar.close()
        if not outcome.ok:
            raise RuntimeError(f"MetaSchedule on {workload.label} failed ({outcome.kind}); see "
                               f"{worker.log_path}: {outcome.error[-1500:]}")
        data = outcome.value
        data["budget"], data["time_budget"], data["seed"] = budget, time_budget, seed
        done.write_text(json.dumps(data))
        return self._run_from_json(data, work_dir)

    @staticmethod
    def _run_from_json(data: dict[str, Any], work_dir: Path) -> MetaScheduleRun:
        info = {k: data[k] for k in ("design_spaces", "unmatched", "mismatched", "tvm") if k in data}
        return MetaScheduleRun(signature=_signature_from_json(data["signature"]), trials=data["trials"],
                               tune_s=data["tune_s"], top=list(data["top"]), work_dir=str(work_dir), info=info)

    def _result(self, run: MetaScheduleRun, evaluator: Evaluator, seed: int, budget: int | None,
                time_budget: float | None, wall_s: float) -> TuningResult:
        space = evaluator.space
        workload = space.workload
        trials: list[Trial] = []
        best = 0.0
        best_own: dict[str, Any] | None = None
        for number, entry in enumerate(run.trials, start=1):
            gflops = workload.gflops(entry["latency_s"]) if entry["latency_s"] else None
            if gflops is not None and gflops > best:
                best, best_own = gflops, entry
            config = Config.from_json(entry["config"]) if entry["config"] else Config({"space": -1})
            trials.append(Trial(number, entry["elapsed_s"], config, entry["status"], gflops, best, True))
        # Re-time MetaSchedule's best schedules with tensorgym's measurer (checked, stored, not charged).
        configs = [Config.from_json(run.trials[i]["config"]) for i in run.top]
        records: list[Record] = evaluator.evaluate(configs) if configs else []
        retimed = [{"config": r.config.to_json(), "status": r.status.value, "gflops": r.gflops,
                    "latency_s": r.latency_s, "latency_cv": r.latency_cv, "error": r.error[:500],
                    "metaschedule_gflops": workload.gflops(run.trials[i]["latency_s"])}
                   for i, r in zip(run.top, records)]
        ok = [r for r in records if r.ok]
        top = max(ok, key=lambda r: r.gflops) if ok else None
        if best_own is not None and not ok:
            log.warning("none of MetaSchedule's best %d schedules of %s ran correctly under tensorgym's measurer",
                        len(records), workload.label)
        extra = {
            "metaschedule_best_gflops": best, "metaschedule_tune_s": run.tune_s, "work_dir": run.work_dir,
            "log": str(Path(run.work_dir) / "metaschedule.log"), "retimed": retimed,
            "retimed_best_gflops": top.gflops if top else 0.0, **run.info,
        }
        return TuningResult(
            agent=self.name, workload=workload.label, workload_key=workload.key, space=space.name,
            target=space.target.fingerprint, seed=seed, budget=budget, time_budget=time_budget, trials=trials,
            best_config=top.config if top else None, best_gflops=top.gflops if top else 0.0,
            best_latency_s=top.latency_s if top else None, best_latency_cv=top.latency_cv if top else None,
            measured=len(trials), reused=0, wall_s=wall_s, extra=extra,
        )


def _update_bar(bar, path: Path) -> None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return
    if not lines:
        return
    last = json.loads(lines[-1])
    bar.update(max(0, last["trials"] - bar.n))
    bar.set_postfix_str(f"best {last['best_gflops']:.1f} GFLOP/s (MetaSchedule's timing)", refresh=True)
