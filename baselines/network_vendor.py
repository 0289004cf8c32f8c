"""The vendor reference of a network: the same weighted sum over PyTorch's per-layer latencies.

``sum_i w_i * t_i`` over the network's live layers, ``t_i`` the latency of
layer ``i`` computed by PyTorch (oneDNN for conv2d, its BLAS for matmul),
each timed by :func:`~tensorgym.baselines.vendor.time_vendor` in its own
process with tensorgym's timing protocol and checked against NumPy. For a
conv2d the faster of PyTorch's two layouts (NCHW and channels-last) is
taken, the strongest reference a PyTorch user gets per layer. It estimates
the same thing as a scheduler's ``f``: the time the model spends in these
layers, nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tensorgym.networks import Network

from .vendor import time_references, vendor_choices

LIBRARY = "torch"


@dataclass
class NetworkVendor:
    """PyTorch's per-layer latencies of a network and their weighted sum."""

    network: str
    layers: list[dict[str, Any]] = field(default_factory=list)  # per task: label, key, weight, latency_s, ...

    @property
    def estimate_s(self) -> float | None:
        """``sum_i w_i t_i`` over the live layers (None if one could not be timed)."""
        total = 0.0
        for layer in self.layers:
            if layer["weight"] > 0:
                if layer.get("latency_s") is None:
                    return None
                total += layer["weight"] * layer["latency_s"]
        return total

    @property
    def library(self) -> str:
        names = sorted({layer["library"] for layer in self.layers if layer.get("library")})
        return ", ".join(names) or LIBRARY

    def latency(self, task: int) -> float | None:
        return self.layers[task].get("latency_s")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "estimate_s": self.estimate_s}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "NetworkVendor":
        return NetworkVendor(data["network"], list(data["layers"]))


def time_network_vendor(network: Network, progress: bool = False) -> NetworkVendor:
    """Time PyTorch on every live layer of ``network`` (see the module docs); layers of weight 0 are skipped."""
    result = NetworkVendor(network.name)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(network.live_tasks), desc=f"PyTorch on {network.name}", unit="layer", dynamic_ncols=True)
    for task in network.tasks:
        entry: dict[str, Any] = {"label": task.label, "key": task.workload.key, "weight": task.weight}
        if task.live:
            timings = time_references(task.workload, [c for c in vendor_choices(task.workload) if c[0] == LIBRARY])
            timed = [t for t in timings if "error" not in t]
            entry.update([("error", t["error"]) for t in timings if "error" in t][-1:])  # the last failure, if any
            if timed:
                best = min(timed, key=lambda t: t["latency_s"])
                entry.update({k: best[k] for k in ("library", "layout", "latency_s", "latency_cv", "max_rel_error")},
                             layouts={t["layout"]: t["latency_s"] for t in timed})
            if bar is not None:
                bar.update(1)
        result.layers.append(entry)
    if bar is not None:
        bar.close()
    return result
