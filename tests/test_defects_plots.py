"""The compare plots: one legend, inside the figure, naming every agent and every vendor line.

The legend used to sit below the panels with the vendors' full names (library, version, kernel family,
code path, layout): it ran off both sides of the figure and the agents' entries were cut off.
"""

from __future__ import annotations

import numpy as np
import pytest

from fakes import synthetic_result

from tensorgym.baselines import vendor as vendor_module
from tensorgym.baselines.board import Leaderboard
from tensorgym.baselines.render import plot_curves, vendor_full_name, vendor_label
from tensorgym.baselines.vendor import time_network_references
from tensorgym.networks import Network
from tensorgym.tuner import Trial, TuningResult
from tensorgym.workloads import conv2d, matmul

AGENTS = ["random", "optuna", "a-search-agent-with-a-long-name"]
VENDORS = [  # as time_vendor writes them
    {"library": "torch 2.13.0 MKL [oneMKL 2024.0 sgemm, unknown code path, packed weights]",
     "layout": "row-major, weights pre-packed", "backend": "mkl", "weights": "pre-packed", "gflops": 70.0},
    {"library": "torch 2.13.0 oneDNN [matmul brg_matmul:avx512_core + 1 reorder per call]", "layout": "row-major",
     "backend": "onednn", "weights": "per call", "gflops": 65.0},
    {"library": "numpy 2.1.3 [openblas 0.3.27 SkylakeX, 2 threads]", "layout": "row-major", "backend": "numpy",
     "weights": "per call", "gflops": 40.0},
    {"library": "torch 2.13.0 MKL [oneMKL 2024.0 sgemm, AVX-512 code path]", "layout": "row-major",
     "backend": "torch", "weights": "per call", "gflops": 55.0},
    {"library": "torch 2.13.0 oneDNN [convolution brg_conv_fwd:avx512_core]", "layout": "NHWC, weights pre-packed",
     "backend": "onednn", "weights": "pre-packed", "gflops": 30.0},
    {"library": "torch", "layout": "NCHW", "gflops": None, "error": "not installed"},  # no line, no entry
]


_run = synthetic_result


def _board() -> Leaderboard:
    board = Leaderboard(env_ids=["tensorgym/Matmul-v0[M=64,N=32,K=48]"], agents=AGENTS, seeds=[0, 1], budget=24,
                        trial_points=(8, 24), time_points=(2.0,))
    rng = np.random.default_rng(0)
    for k, agent in enumerate(AGENTS):
        board.results[(board.env_ids[0], agent)] = [_run(agent, list((40 + 15 * k) * rng.random(24)), s)
                                                    for s in (0, 1)]
    board.vendor[board.env_ids[0]] = VENDORS
    return board


def _legends_inside(fig) -> list:
    """The figure's legends (one expected), each checked to lie inside the figure."""
    fig.canvas.draw()  # the whole figure, as a plain savefig would show it
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    figure = fig.bbox
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert figure.x0 <= box.x0 and box.x1 <= figure.x1 and figure.y0 <= box.y0 and box.y1 <= figure.y1, \
            (box, figure)
    return legends


@pytest.fixture()
def figures(monkeypatch):
    """Every figure the plotting functions save (and the PNGs' paths)."""
    from matplotlib.figure import Figure

    saved = []
    original = Figure.savefig

    def savefig(self, path, *args, **kwargs):
        saved.append(self)
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def test_vendor_labels_are_short():
    assert vendor_label(VENDORS[0]) == "MKL sgemm (packed)"
    assert vendor_label(VENDORS[1]) == "oneDNN brg_matmul:avx512_core"
    assert vendor_label(VENDORS[2]) == "numpy openblas SkylakeX"
    assert vendor_label(VENDORS[3]) == "MKL sgemm"
    assert vendor_label(VENDORS[4]) == "oneDNN brg_conv_fwd:avx512_core (NHWC, packed)"
    assert vendor_label({"library": "torch 2.13.0 cuBLAS TF32", "layout": "row-major"}) == "cuBLAS TF32"
    assert vendor_label({"library": "torch 2.13.0 oneDNN [not oneDNN: PyTorch's own kernel]",
                         "layout": "NCHW"}) == "torch native kernel (NCHW)"
    assert vendor_full_name(VENDORS[0]) == ("torch 2.13.0 MKL [oneMKL 2024.0 sgemm, unknown code path, packed "
                                            "weights] row-major, weights pre-packed")
    assert all(len(vendor_label(v)) <= 60 for v in VENDORS)


def test_the_compare_plot_has_one_legend_inside_with_every_agent_and_vendor(tmp_path, figures):
    board = _board()
    paths = plot_curves(board, tmp_path)
    assert len(paths) == 1 and paths[0].stat().st_size > 0 and len(figures) == 1
    legends = _legends_inside(figures[0])
    assert len(legends) == 1
    labels = [t.get_text() for t in legends[0].get_texts()]
    vendors = [v for v in VENDORS if v["gflops"]]
    assert len(labels) == len(AGENTS) + len(vendors)
    for agent in AGENTS:
        assert sum(label.startswith(agent) for label in labels) == 1, (agent, labels)
    for ref in vendors:
        assert labels.count(f"vendor: {vendor_label(ref)}") == 1, (ref, labels)


def test_the_compare_network_plot_has_one_legend_inside(tmp_path, figures, monkeypatch):
    network = Network.from_pairs("ResNet-18", [(conv2d(1, 16, 14, 14, 16, 3, 3, name="c"), 1.0),
                                               (matmul(64, 64, 64, name="m"), 2.0)])
    schedulers = ["round-robin", "gradient", "dual-task"]
    board = Leaderboard(env_ids=[network.env_id], agents=schedulers, seeds=[0, 1], budget=20, trial_points=None,
                        time_points=None)
    for k, name in enumerate(schedulers):
        board.results[(network.env_id, name)] = []
        for seed in (0, 1):
            estimates = [(3.0 - k * 0.3) * 1e-3 / (1 + i / 5) for i in range(20)]
            trials = [Trial(i + 1, 0.5 * (i + 1), None, "ok", None, network.gflop / e, True, task=i % 2,
                            latency_s=1e-3, best_latency_s=e) for i, e in enumerate(estimates)]
            board.results[(network.env_id, name)].append(TuningResult(
                name, "ResNet-18", "n", "tiles", "t", seed, 20, None, trials, best_gflops=trials[-1].best_gflops))
    timed = {"latency_cv": 0.01, "max_rel_error": 1e-6}
    timings = {"c": {**VENDORS[4], **timed, "latency_s": 1.2e-3}, "m": {**VENDORS[3], **timed, "latency_s": 0.3e-3}}
    monkeypatch.setattr(vendor_module, "time_references",
                        lambda workload, choices, native_blas=False: [timings[workload.label.split("/")[-1]]])
    board.vendor[network.env_id] = time_network_references(network)  # PyTorch's weighted sum: one reference
    plot_curves(board, tmp_path)
    legends = _legends_inside(figures[0])
    assert len(legends) == 1
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert len(labels) == len(schedulers) + 1 and labels[-1] == "vendor: PyTorch weighted sum (oneDNN, MKL)"


def test_a_long_legend_goes_below_the_panels_and_stays_inside(tmp_path, figures):
    board = _board()
    board.agents = AGENTS + [f"agent-{i}" for i in range(9)]
    for agent in board.agents[len(AGENTS):]:
        board.results[(board.env_ids[0], agent)] = board.results[(board.env_ids[0], "random")]
    plot_curves(board, tmp_path)
    legends = _legends_inside(figures[0])
    assert len(legends) == 1 and legends[0] in figures[0].legends  # below, not over the curves
    assert len(legends[0].get_texts()) == len(board.agents) + len([v for v in VENDORS if v["gflops"]])
