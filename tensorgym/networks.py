"""Networks as data: the layers of a model and how often each occurs in it.

A :class:`Network` is a weighted list of workloads (tasks). A task's
``weight`` is the number of times its layer occurs in the real model, so the
estimated network latency is the objective of Ansor's and GTA's (seed 002)
task schedulers::

    f = sum_i weight_i * m_i        (m_i: the best latency of task i)

It estimates the time the model spends in these layers (nothing else: no
pooling, activations or layers outside the suite). A layer of a seed table
that does not occur in the real model keeps **weight 0**: it is listed, not
tuned, and adds nothing to ``f``.

The built-in networks are the seed suites (:mod:`tensorgym.suites`), batch 1,
with the counts derived below from the architectures' definitions. The
ResNet and BERT counts were cross-checked against a table of every
conv2d/matmul the reference implementations execute (torchvision 0.29.1's
``resnet18``, a ResNet-50 v1 written in ``torch.nn``, HF transformers
5.23.0's ``BertModel``): they agree shape for shape. The YOLO-9000 counts
follow Darknet's ``yolo9000.cfg`` layer by layer.

**ResNet-18** (He et al. 2016, Table 1; 224x224) has 20 convolutions: the
7x7/2 stem; four stages of two basic blocks (two 3x3 convs each), the first
block of stages 2-4 starting with a 3x3/2 and adding a 1x1/2 projection
shortcut. The 11 distinct shapes are exactly C0-C11 without C2:

=====  ======  =======================================================
layer  weight  where
=====  ======  =======================================================
C0     1       stem 3->64 7x7/2 @224
C1     4       stage 1: 2 blocks x 2 convs 64->64 3x3 @56
C2     0       64->64 1x1 @56 does not occur: stage 1 needs no
               projection and basic blocks have no 1x1 (it is
               ResNet-50's R1, which seed 002's table lists here)
C3     1       stage 2 block 1, 64->128 3x3/2
C4     1       stage 2 projection 64->128 1x1/2
C5     3       stage 2: 128->128 3x3 (block 1 second conv, block 2 x2)
C6/C7  1/1     stage 3 block 1 3x3/2 and projection 1x1/2
C8     3       stage 3 256->256 3x3
C9/C10 1/1     stage 4 block 1 3x3/2 and projection 1x1/2
C11    3       stage 4 512->512 3x3
=====  ======  =======================================================

**ResNet-50** is the original v1 (stride 2 on the *first 1x1* of the first
bottleneck of stages 2-4, as in the Caffe release): R4, R7 and R10 are those
strided 1x1 reduce convs, which torchvision's v1.5 does not have. Per stage
(blocks: 3, 4, 6, 3), each bottleneck is 1x1 reduce, 3x3, 1x1 expand:

* stem R0 x1;
* stage 1 @56: R1 (64->64 1x1, block 1's reduce) x1, R2 (3x3) x3, R3 (64->256 1x1: 3 expands + the stride-1
  projection of block 1) x4;
* stage 2 @28: R4 (256->128 1x1/2, block 1's reduce) x1, R5 (3x3) x4, R6 (128->512 expand) x4;
* stage 3 @14: R7 x1, R8 (3x3) x6, R9 (256->1024 expand) x6;
* stage 4 @7: R10 x1, R11 (3x3) x3, R12 (512->2048 expand) x3.

All 13 occur; they cover 38 of ResNet-50's 53 convs. The other 15 (the
reduce convs of blocks 2+, 256->64 and the like, and the three strided
projection shortcuts) are not in seed 000's suite, so ``f`` leaves them out.

**YOLO-9000** is Darknet-19 at 544x544 with YOLO9000's single 1x1 detection
conv (``yolo9000.cfg``): 3x3 convs double the channels after each 2x2
max-pool, with 1x1 convs halving them in between:

* @544: Y0 (3->32 3x3) x1; @272: Y1 (32->64) x1;
* @136: Y2 (64->128 3x3) x2, Y3 (128->64 1x1) x1;
* @68: Y4 (128->256 3x3) x2, Y5 (256->128 1x1) x1;
* @34: Y7 (256->512 3x3) x3, Y8 (512->256 1x1) x2;
* @17: Y9 (512->1024 3x3) x3, Y10 (1024->512 1x1) x2.

**Y6** (256->512 3x3 @68) does not occur (at 68x68 the 3x3 convs are
128->256): weight 0. The detection conv (1024->28269 1x1 @17) is not in the
suite. The suite covers 18 of the model's 19 convs.

**BERT-base** at sequence length 512 (batch 1, 12 layers, d=768, FFN 3072):
M3 (512x3072x768, FFN up) and M5 (512x768x3072, FFN down) occur once per
layer: weight 12 each. M1 and M4 are BERT-*large* FFN shapes (d=1024, FFN
4096): weight 0. M2 (512x64x768) and M0 (512x64x1024) are one head's slice
of the Q/K/V projection of BERT-base and BERT-large: BERT (the original and
HF's ``BertModel``) computes each projection as one 768->768 dense layer, so
they never run as such: weight 0 (an implementation that projected head by
head would run M2 3 x 12 heads x 12 layers = 432 times; M0 never occurs in
BERT-base). The network's ``f`` therefore covers the FFN matmuls only, not
the Q/K/V/output projections or the attention products.

**Your own networks**: :meth:`Network.from_pairs` with ``(workload, weight)``
pairs in Python, or :func:`load_network` on a JSON or TOML file::

    {"name": "my-net", "layers": [
        {"op": "conv2d", "C": 64, "H": 56, "F": 64, "R": 3, "count": 4},
        {"op": "matmul", "M": 512, "N": 768, "K": 3072, "count": 12, "name": "ffn-down"}]}

conv2d layers take ``N`` (default 1), ``C``, ``H``, ``W`` (default H), ``F``,
``R``, ``S`` (default R), ``stride`` (default 1), ``padding`` (default
"same"); matmul layers ``M``, ``N``, ``K``; every layer a ``count`` and
optionally a ``name``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, UnknownNameError
from .suites import SUITES
from .workloads import Workload, WorkloadError, conv2d, matmul


@dataclass(frozen=True)
class NetworkTask:
    """One layer shape of a network and how often it occurs (its weight in ``f``)."""

    workload: Workload
    weight: float
    note: str = ""  # where the weight comes from

    @property
    def label(self) -> str:
        return self.workload.label

    @property
    def live(self) -> bool:
        """Whether the task counts in ``f`` (weight > 0): tasks of weight 0 are listed, never tuned."""
        return self.weight > 0


@dataclass(frozen=True)
class Network:
    """A named, weighted list of distinct workloads (see the module docs)."""

    name: str
    tasks: tuple[NetworkTask, ...]
    source: str = ""  # where the network comes from (a paper, a file)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidArgumentError(f"a network needs a name, got {self.name!r}")
        if not self.tasks:
            raise InvalidArgumentError(f"network {self.name!r} has no layers")
        keys: dict[str, str] = {}
        for task in self.tasks:
            if not isinstance(task.workload, Workload):
                raise InvalidArgumentError(f"network {self.name!r}: a task's workload must be a tensorgym Workload, "
                                           f"got {type(task.workload).__name__}")
            _check_weight(task.weight, f"network {self.name!r}, {task.label}")
            if task.workload.key in keys:
                raise InvalidArgumentError(f"network {self.name!r} lists the shape of {task.label} twice (also as "
                                           f"{keys[task.workload.key]}); give it once with the summed count")
            keys[task.workload.key] = task.label
        if not any(task.live for task in self.tasks):
            raise InvalidArgumentError(f"network {self.name!r} has no layer with a positive count")

    # -- construction ------------------------------------------------------------
    @staticmethod
    def from_pairs(name: str, pairs: Iterable[tuple[Workload, float]], source: str = "") -> "Network":
        """A network of ``(workload, weight)`` pairs (weight: how often the layer occurs)."""
        tasks = []
        for item in pairs:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise InvalidArgumentError(f"a network is a list of (workload, weight) pairs, got {item!r}")
            tasks.append(NetworkTask(item[0], item[1]))
        return Network(name, tuple(tasks), source)

    def with_dtype(self, dtype: str) -> "Network":
        """The same network computed in another data type (every workload's ``dtype`` replaced)."""
        try:
            tasks = tuple(dataclasses.replace(t, workload=dataclasses.replace(t.workload, dtype=dtype))
                          for t in self.tasks)
        except (WorkloadError, TypeError) as exc:
            raise InvalidArgumentError(f"network {self.name!r} in dtype {dtype!r}: {exc}") from None
        return dataclasses.replace(self, tasks=tasks)

    # -- facts -------------------------------------------------------------------
    @property
    def workloads(self) -> tuple[Workload, ...]:
        return tuple(t.workload for t in self.tasks)

    @property
    def weights(self) -> tuple[float, ...]:
        return tuple(t.weight for t in self.tasks)

    @property
    def live_tasks(self) -> tuple[int, ...]:
        """Indices of the tasks of positive weight (the ones a scheduler tunes)."""
        return tuple(i for i, t in enumerate(self.tasks) if t.live)

    @property
    def env_id(self) -> str:
        """The Gymnasium id of a built-in network, e.g. ``Network-ResNet18-v0``."""
        return f"Network-{_compact(self.name)}-v0"

    @property
    def gflop(self) -> float:
        """GFLOP of one forward pass through the network's layers (weighted)."""
        return sum(t.weight * t.workload.gflop for t in self.tasks)

    def estimate(self, latencies: Sequence[float | None]) -> float | None:
        """``f = sum_i weight_i * latency_i`` over the live tasks; None if a live task has no latency."""
        if len(latencies) != len(self.tasks):
            raise InvalidArgumentError(f"{len(latencies)} latencies for the {len(self.tasks)} tasks of {self.name}")
        total = 0.0
        for task, latency in zip(self.tasks, latencies):
            if not task.live:
                continue
            if latency is None or not math.isfinite(latency):
                return None
            total += task.weight * latency
        return total

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source,
                "tasks": [{"workload": t.workload.to_json(), "weight": t.weight, "note": t.note} for t in self.tasks]}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "Network":
        tasks = tuple(NetworkTask(Workload.from_json(t["workload"]), t["weight"], t.get("note", ""))
                      for t in data["tasks"])
        return Network(data["name"], tasks, data.get("source", ""))


def _check_weight(weight: Any, where: str) -> None:
    if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, (int, float, np.integer, np.floating)) \
            or not math.isfinite(weight) or weight < 0:
        raise InvalidArgumentError(f"{where}: the weight (count) must be a non-negative number, got {weight!r}")


def _compact(name: str) -> str:
    """``"ResNet-18"`` -> ``"ResNet18"``: the name without separators (ids, lookups)."""
    return re.sub(r"[^A-Za-z0-9]", "", name)


# -- the built-in networks ---------------------------------------------------------------------------
# Layer -> (weight, note); derivations in the module docs.
_RESNET18_WEIGHTS = {
    "C0": (1, "stem"), "C1": (4, "stage 1, 2 blocks x 2"),
    "C2": (0, "does not occur in ResNet-18 (ResNet-50's R1)"),
    "C3": (1, "stage 2 block 1"), "C4": (1, "stage 2 projection"), "C5": (3, "stage 2"),
    "C6": (1, "stage 3 block 1"), "C7": (1, "stage 3 projection"), "C8": (3, "stage 3"),
    "C9": (1, "stage 4 block 1"), "C10": (1, "stage 4 projection"), "C11": (3, "stage 4"),
}
_RESNET50_WEIGHTS = {
    "R0": (1, "stem"), "R1": (1, "stage 1 block 1 reduce"), "R2": (3, "stage 1 3x3"),
    "R3": (4, "stage 1: 3 expands + block 1 projection"), "R4": (1, "stage 2 block 1 reduce, stride 2 (v1)"),
    "R5": (4, "stage 2 3x3"), "R6": (4, "stage 2 expand"), "R7": (1, "stage 3 block 1 reduce, stride 2 (v1)"),
    "R8": (6, "stage 3 3x3"), "R9": (6, "stage 3 expand"), "R10": (1, "stage 4 block 1 reduce, stride 2 (v1)"),
    "R11": (3, "stage 4 3x3"), "R12": (3, "stage 4 expand"),
}
_YOLO9000_WEIGHTS = {
    "Y0": (1, "@544"), "Y1": (1, "@272"), "Y2": (2, "@136"), "Y3": (1, "@136"), "Y4": (2, "@68"),
    "Y5": (1, "@68"), "Y6": (0, "does not occur in Darknet-19 (its 3x3 convs at 68x68 are 128->256)"),
    "Y7": (3, "@34"), "Y8": (2, "@34"), "Y9": (3, "@17"), "Y10": (2, "@17"),
}
_BERT_BASE_WEIGHTS = {
    "M0": (0, "BERT-large's per-head Q/K/V slice; never run by BERT-base"),
    "M1": (0, "BERT-large FFN up; not in BERT-base"),
    "M2": (0, "one head's slice of a Q/K/V projection; BERT runs it as one 768->768 dense layer"),
    "M3": (12, "FFN up, one per layer"),
    "M4": (0, "BERT-large FFN down; not in BERT-base"),
    "M5": (12, "FFN down, one per layer"),
}


def _builtin(name: str, suite: str, weights: Mapping[str, tuple[int, str]], source: str) -> Network:
    layers = SUITES[suite].layers
    assert [w.name for w in layers] == list(weights), f"{name}: the weights do not match suite {suite}"
    return Network(name, tuple(NetworkTask(w, weights[w.name][0], weights[w.name][1]) for w in layers), source)


NETWORKS: dict[str, Network] = {
    "ResNet-18": _builtin("ResNet-18", "ResNet-18", _RESNET18_WEIGHTS,
                          "He et al. 2016 (ResNet-18, 224x224); layers C0-C11 of seed 002"),
    "ResNet-50": _builtin("ResNet-50", "ResNet-50", _RESNET50_WEIGHTS,
                          "He et al. 2016 (ResNet-50 v1, 224x224); layers R0-R12 of seed 000"),
    "YOLO-9000": _builtin("YOLO-9000", "YOLO-9000", _YOLO9000_WEIGHTS,
                          "Redmon & Farhadi 2017 (YOLO9000 / Darknet-19, 544x544); layers Y0-Y10 of seed 000"),
    "BERT-base": _builtin("BERT-base", "BERT", _BERT_BASE_WEIGHTS,
                          "Devlin et al. 2019 (BERT-base, sequence 512); layers M0-M5 of seed 000"),
}


def network(name: "str | Network") -> Network:
    """A built-in network by name (``"ResNet-18"``, ``"resnet18"`` and ``"Network-ResNet18-v0"`` all work)."""
    if isinstance(name, Network):
        return name
    if not isinstance(name, str):
        raise InvalidArgumentError(f"a network is a name or a Network, got {type(name).__name__}")
    wanted = _compact(re.sub(r"^Network-|-v\d+$", "", name)).lower()
    for net in NETWORKS.values():
        if _compact(net.name).lower() == wanted:
            return net
    import difflib

    close = difflib.get_close_matches(name, list(NETWORKS), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownNameError(f"unknown network {name!r}{hint}; networks: {', '.join(NETWORKS)}, or a JSON/TOML file "
                           f"of layers and counts")


# -- networks of your own, from a file ---------------------------------------------------------------
_CONV_FIELDS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")
_MATMUL_FIELDS = ("M", "N", "K")


def load_network(path: str | Path) -> Network:
    """A network from a JSON or TOML file of layers and counts (format in the module docs)."""
    path = Path(path)
    text = path.read_text()  # OSError names the file
    if path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise InvalidArgumentError(f"{path}: TOML needs Python >= 3.11; write the network as JSON") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidArgumentError(f"{path} is not valid TOML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{path} is not valid JSON ({exc}); a network file is JSON or .toml") from None
    return network_from_data(data, default_name=path.stem, source=str(path))


def network_from_data(data: Any, default_name: str = "custom", source: str = "") -> Network:
    """A network from parsed JSON/TOML data: ``{"name": ..., "layers": [{"op": ..., shape..., "count": n}]}``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("layers"), list) or not data["layers"]:
        raise InvalidArgumentError(f"{source or 'a network'}: expected a table with a non-empty 'layers' list, e.g. "
                                   '{"name": "my-net", "layers": [{"op": "matmul", "M": 512, "N": 768, "K": 3072, '
                                   '"count": 12}]}')
    name = str(data.get("name") or default_name)
    tasks = []
    for i, layer in enumerate(data["layers"]):
        where = f"{source or name}, layer {i + 1}"
        if not isinstance(layer, Mapping):
            raise InvalidArgumentError(f"{where}: a layer is a table of op, shape and count, got {layer!r}")
        layer = dict(layer)
        if "count" not in layer:
            raise InvalidArgumentError(f"{where}: give its 'count' (how often the layer occurs in the network)")
        count = layer.pop("count")
        _check_weight(count, where)
        layer_name = str(layer.pop("name", "") or f"L{i}")
        op = layer.pop("op", None)
        fields = {"conv2d": _CONV_FIELDS, "matmul": _MATMUL_FIELDS}.get(op)
        if fields is None:
            raise InvalidArgumentError(f"{where}: 'op' must be 'conv2d' or 'matmul', got {op!r}")
        dtype = layer.pop("dtype", "float32")
        unknown = sorted(set(layer) - set(fields))
        if unknown:
            raise InvalidArgumentError(f"{where}: unknown field(s) {', '.join(unknown)}; a {op} layer takes "
                                       f"{', '.join(fields)}, count, name, dtype")
        try:
            if op == "conv2d":
                missing = [f for f in ("C", "H", "F", "R") if f not in layer]
                if missing:
                    raise InvalidArgumentError(f"{where}: missing {', '.join(missing)} (a conv2d layer needs C, H, F, "
                                               f"R; N, W, S, stride, padding have defaults)")
                workload = conv2d(layer.get("N", 1), layer["C"], layer["H"], layer.get("W", layer["H"]), layer["F"],
                                  layer["R"], layer.get("S", layer["R"]), layer.get("stride", 1),
                                  layer.get("padding", "same"), dtype=dtype, suite=name, name=layer_name)
            else:
                missing = [f for f in _MATMUL_FIELDS if f not in layer]
                if missing:
                    raise InvalidArgumentError(f"{where}: missing {', '.join(missing)} (a matmul layer needs M, N, K)")
                workload = matmul(layer["M"], layer["N"], layer["K"], dtype=dtype, suite=name, name=layer_name)
        except WorkloadError as exc:
            raise InvalidArgumentError(f"{where}: {exc}") from None
        tasks.append(NetworkTask(workload, count, "given"))
    return Network(name, tuple(tasks), source)


def resolve_network(spec: "str | Path | Network") -> Network:
    """A network from a built-in name, a JSON/TOML file path, or a :class:`Network` (the command line's rule:
    an argument that names an existing file, or ends in .json/.toml, is a file)."""
    if isinstance(spec, Network):
        return spec
    if isinstance(spec, Path) or (isinstance(spec, str) and (Path(spec).is_file()
                                                             or spec.lower().endswith((".json", ".toml")))):
        return load_network(spec)
    return network(spec)
