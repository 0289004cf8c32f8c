"""MetaSchedule's design spaces of a workload, as knobs: what its traces decide and how to replay them.

A design space is a trace with sampling instructions; a point of it is the
values of its *knobs*: ``tile`` (a SamplePerfectTile decision), ``cat`` (a
SampleCategorical decision: the index of the candidate, e.g. of the unroll
depth), ``loc`` (a SampleComputeLocation decision) and ``par`` (the value of
the ``meta_schedule.parallel`` annotation, the one non-decision that
MetaSchedule's MutateParallel changes). A design space's knobs are its
*signature*; :class:`Design` replays a design space with given knob values
and runs MetaSchedule's postprocessors, and finds the knob values of a trace
MetaSchedule measured.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from math import prod
from typing import Any

from tensorgym.config import Config
from tensorgym.measure.worker import Worker
from tensorgym.spaces.base import SpaceError
from tensorgym.target import Target
from tensorgym.workloads import Workload

from . import packed
from .tvmscript import install_fast_tvmscript_stack

_PARALLEL_KEY = "meta_schedule.parallel"
_SAMPLING = {"SamplePerfectTile": "tile", "SampleCategorical": "cat", "SampleComputeLocation": "loc"}


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


def scalar(value: Any) -> Any:
    """The Python value of a TVM scalar object (``IntImm``, ``FloatImm``), or the value itself."""
    return value.value if hasattr(value, "value") else value


def _int(value: Any) -> int:
    return int(scalar(value))


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


class Design:
    """MetaSchedule's design spaces of one workload on one target, in this process (needs TVM)."""

    def __init__(self, workload: Workload, target: Target):
        install_fast_tvmscript_stack()
        import tvm
        from tvm.s_tir import meta_schedule as ms

        self.mod = tvm.IRModule({"main": packed.prim_func(workload)})
        # int8 / bf16: MetaSchedule's rules with its dot-product tiling on tensorgym's intrinsic (see .packed).
        self.space_generator = packed.space_generator(workload) if packed.is_packed(workload) else "post-order-apply"
        context = ms.TuneContext(mod=self.mod, target=target.tvm_target(), space_generator=self.space_generator,
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
def design(workload: Workload, target: Target) -> Design:
    """One per process and workload: build workers regenerate the design spaces once, not per config."""
    return Design(workload, target)


def signature_here(workload: Workload, target: Target) -> list[list[dict[str, Any]]]:
    """Runs in a worker: the design-space signature as JSON."""
    return [[k.to_json() for k in knobs] for knobs in design(workload, target).signature]


def signature_from_json(data: Sequence[Sequence[dict[str, Any]]]) -> Signature:
    return tuple(tuple(Knob.from_json(k) for k in knobs) for knobs in data)


def design_signature(workload: Workload, target: Target, timeout: float = 300.0) -> Signature:
    """MetaSchedule's design-space signature of a workload, computed in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="tensorgym-ms-") as logs:
        worker = Worker("metaschedule-space", logs, env={"TVM_NUM_THREADS": str(target.num_cores)}, preload=())
        try:
            outcome = worker.call(f"{__name__}:signature_here", workload, target, timeout=timeout)
        finally:
            worker.close()
    if not outcome.ok:
        raise RuntimeError(f"generating MetaSchedule's design space for {workload.label} failed "
                           f"({outcome.kind}): {outcome.error[:800]}")
    return signature_from_json(outcome.value)
