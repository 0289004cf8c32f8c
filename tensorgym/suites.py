"""The benchmark suites of the seed papers, as data.

* ResNet-50 R0-R12, YOLO-9000 Y0-Y10 and BERT M0-M5: seed 000, Table 1. H/W is the
  input size, "same" padding ``(R - 1) // 2``, stride 2 where the table marks ``*``
  (the conventions of seed 000's released scripts).
* ResNet-18 C0-C11: seed 002 (GTA), the shapes of its evaluation (those of
  AMOS's benchmark script).

All layers are batch 1, fp32, NCHW.
"""

from __future__ import annotations

from dataclasses import dataclass

from .workloads import Workload, conv2d, matmul


@dataclass(frozen=True)
class Suite:
    """A named family of layers; ``env_prefix`` forms the Gymnasium ids."""

    name: str  # display name, e.g. "ResNet-50"
    env_prefix: str  # e.g. "Conv2d-ResNet" -> "Conv2d-ResNet-R5-v0"
    layers: tuple[Workload, ...]

    def __getitem__(self, layer: str) -> Workload:
        for wl in self.layers:
            if wl.name == layer:
                return wl
        raise KeyError(f"{self.name} has no layer {layer!r}; layers: {[w.name for w in self.layers]}")


# (layer, F, C, H/W, R/S, stride)
_RESNET50 = [
    ("R0", 64, 3, 224, 7, 2), ("R1", 64, 64, 56, 1, 1), ("R2", 64, 64, 56, 3, 1),
    ("R3", 256, 64, 56, 1, 1), ("R4", 128, 256, 56, 1, 2), ("R5", 128, 128, 28, 3, 1),
    ("R6", 512, 128, 28, 1, 1), ("R7", 256, 512, 28, 1, 2), ("R8", 256, 256, 14, 3, 1),
    ("R9", 1024, 256, 14, 1, 1), ("R10", 512, 1024, 14, 1, 2), ("R11", 512, 512, 7, 3, 1),
    ("R12", 2048, 512, 7, 1, 1),
]
_YOLO9000 = [
    ("Y0", 32, 3, 544, 3, 1), ("Y1", 64, 32, 272, 3, 1), ("Y2", 128, 64, 136, 3, 1),
    ("Y3", 64, 128, 136, 1, 1), ("Y4", 256, 128, 68, 3, 1), ("Y5", 128, 256, 68, 1, 1),
    ("Y6", 512, 256, 68, 3, 1), ("Y7", 512, 256, 34, 3, 1), ("Y8", 256, 512, 34, 1, 1),
    ("Y9", 1024, 512, 17, 3, 1), ("Y10", 512, 1024, 17, 1, 1),
]
# (layer, M, N, K)
_BERT = [
    ("M0", 512, 64, 1024), ("M1", 512, 4096, 1024), ("M2", 512, 64, 768),
    ("M3", 512, 3072, 768), ("M4", 512, 1024, 4096), ("M5", 512, 768, 3072),
]
# (layer, C, H/W, F, R/S, stride, pad)
_RESNET18 = [
    ("C0", 3, 224, 64, 7, 2, 3), ("C1", 64, 56, 64, 3, 1, 1), ("C2", 64, 56, 64, 1, 1, 0),
    ("C3", 64, 56, 128, 3, 2, 1), ("C4", 64, 56, 128, 1, 2, 0), ("C5", 128, 28, 128, 3, 1, 1),
    ("C6", 128, 28, 256, 3, 2, 1), ("C7", 128, 28, 256, 1, 2, 0), ("C8", 256, 14, 256, 3, 1, 1),
    ("C9", 256, 14, 512, 3, 2, 1), ("C10", 256, 14, 512, 1, 2, 0), ("C11", 512, 7, 512, 3, 1, 1),
]


def _conv_suite(name: str, prefix: str, rows) -> Suite:
    return Suite(
        name, prefix,
        tuple(conv2d(1, C, H, H, F, R, R, stride, "same", suite=name, name=layer)
              for layer, F, C, H, R, stride in rows),
    )


SUITES: dict[str, Suite] = {
    "ResNet-50": _conv_suite("ResNet-50", "Conv2d-ResNet", _RESNET50),
    "YOLO-9000": _conv_suite("YOLO-9000", "Conv2d-YOLO", _YOLO9000),
    "BERT": Suite("BERT", "Matmul-BERT", tuple(matmul(M, N, K, suite="BERT", name=layer) for layer, M, N, K in _BERT)),
    "ResNet-18": Suite(
        "ResNet-18", "Conv2d-ResNet18",
        tuple(
            conv2d(1, C, H, H, F, R, R, stride, pad, suite="ResNet-18", name=layer)
            for layer, C, H, F, R, stride, pad in _RESNET18
        ),
    ),
}


def env_id(suite: Suite, workload: Workload) -> str:
    return f"{suite.env_prefix}-{workload.name}-v0"


def all_suite_workloads() -> dict[str, Workload]:
    """Every suite layer by its Gymnasium id, e.g. ``Conv2d-ResNet-R5-v0``."""
    return {env_id(suite, wl): wl for suite in SUITES.values() for wl in suite.layers}
