"""Renderers of network runs: a run's per-layer table; a compare-network board as text, Markdown, CSV, JSON, PNG."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from tensorgym.network_result import NetworkResult
from tensorgym.text import format_table

from .network_board import NetworkBoard
from .network_vendor import NetworkVendor
from .render import _num


def _cells(board: NetworkBoard) -> tuple[list[str], list[list[str]]]:
    names = board.metric_names()
    header = ["scheduler", "n"] + names
    digits = {n: (0 if n in ("to-RR", "%RR") else 2 if n == "xPyTorch" else 3) for n in names}
    cells = []
    for row in board.rows():
        stats = row["stats"]
        cells.append([row["scheduler"], str(len(row["seeds"])) if row["seeds"] else ""]
                     + [stats[n].format(digits[n]) if n in stats else "" for n in names])
    return header, cells


def text_table(board: NetworkBoard) -> str:
    """The table as aligned text (latencies in ms)."""
    header, cells = _cells(board)
    return format_table(cells, header)


def caption(board: NetworkBoard) -> str:
    return (f"{board.network}, {board.space} space{f' ({board.dtype})' if board.dtype else ''}: estimated network "
            f"latency (ms, sum of count x best latency over the layers) after N trials (@N), after T seconds of "
            f"tuning clock (@Ts) and at the end (final); to-RR: trials to reach round-robin's final latency (same "
            f"seed), %RR: as a share of round-robin's trials; xPyTorch: PyTorch's weighted sum over the same layers "
            f"/ the final estimate. Mean (min-max) over seeds {board.seeds}, budget {board.budget} trials.")


def markdown(board: NetworkBoard) -> str:
    header, cells = _cells(board)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c or " " for c in row) + " |" for row in cells]
    return "\n".join(lines) + f"\n\n{caption(board)}\n"


def write_tables(board: NetworkBoard, out_dir: str | Path) -> dict[str, Path]:
    """Write compare_network.csv, .json and .md; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "compare_network.csv", "json": out / "compare_network.json",
             "md": out / "compare_network.md"}
    with paths["csv"].open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["network", "scheduler", "metric", "mean", "min", "max", "n", "values"])
        for row in board.rows():
            for metric, stat in row["stats"].items():
                writer.writerow([board.network, row["scheduler"], metric, _num(stat.mean), _num(stat.min),
                                 _num(stat.max), len(stat.values), json.dumps(list(stat.values))])
    paths["json"].write_text(json.dumps(board.to_json(), indent=1))
    paths["md"].write_text(markdown(board))
    return paths


def plot(board: NetworkBoard, out_dir: str | Path) -> Path:
    """compare_network.png: the estimated network latency vs trials and vs seconds, one line per scheduler
    (mean over seeds, min-max band; log scale), PyTorch's weighted sum as a horizontal line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 5.2), layout="constrained")
    FigureCanvasAgg(fig)
    by_trials, by_time = fig.subplots(1, 2)
    horizon = max((r.trials[-1].elapsed_s for runs in board.results.values() for r in runs if r.trials), default=1.0)
    grid = np.linspace(0.0, horizon, 400)
    for i, scheduler in enumerate(board.schedulers):
        runs = [r for r in board.results.get(scheduler, []) if r.trials]
        if not runs:
            continue
        color = f"C{i % 10}"
        xs = np.arange(1, max(len(r.trials) for r in runs) + 1)
        _band(by_trials, xs, [[_ms_or_nan(r.estimate_at(trials=int(x))) for x in xs] for r in runs], color,
              f"{scheduler} (n={len(runs)})")
        _band(by_time, grid, [[_ms_or_nan(r.estimate_at(seconds=float(t))) for t in grid] for r in runs], color, None)
    if board.vendor is not None and board.vendor.estimate_s:
        for ax, label in ((by_trials, f"PyTorch weighted sum ({board.vendor.library})"), (by_time, None)):
            ax.axhline(board.vendor.estimate_s * 1e3, color="0.3", linestyle="--", linewidth=1.2, label=label)
    fig.suptitle(f"{board.network}: estimated network latency ({board.space} space"
                 f"{f', {board.dtype}' if board.dtype else ''})", fontsize=12)
    by_trials.set(xlabel="trials", ylabel="network latency (ms)", yscale="log")
    by_time.set(xlabel="tuning clock (s)", ylabel="network latency (ms)", yscale="log")
    for ax in (by_trials, by_time):
        ax.grid(alpha=0.3, which="both")
    handles, labels = by_trials.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize=9, frameon=False)
    path = Path(out_dir) / "compare_network.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _ms_or_nan(value: float | None) -> float:
    return float("nan") if value is None else value * 1e3


def _band(ax, xs: np.ndarray, curves: list[list[float]], color: str, label: str | None) -> None:
    """Mean over runs with a min-max band, drawn where every run has an estimate (after its warm-up)."""
    data = np.array(curves, dtype=float)
    ax.plot(xs, data.mean(axis=0), color=color, label=label, linewidth=1.6, drawstyle="steps-post")
    if len(data) > 1:
        ax.fill_between(xs, data.min(axis=0), data.max(axis=0), color=color, alpha=0.18, step="post")


def layer_table(result: NetworkResult, vendor: NetworkVendor | None = None) -> str:
    """One network run, per layer: count, best latency, chosen candidate, trials, share of the network time
    (and PyTorch's latency and the speed-up over it, given the vendor timings), then the totals."""
    rows = []
    for i, task in enumerate(result.tasks):
        ref = vendor.latency(i) if vendor is not None else None
        if task.weight <= 0:
            rows.append((task.label, _count(task.weight), "-", "-", "0", "-", "-", "-"))
            continue
        share = result.share(i)
        rows.append((
            task.label, _count(task.weight), "-" if task.best_latency_s is None else f"{task.best_latency_s * 1e3:.4f}",
            task.best_candidate_name or "-", str(task.trials), "-" if share is None else f"{share * 100:.1f}",
            "-" if ref is None else f"{ref * 1e3:.4f}",
            f"{ref / task.best_latency_s:.2f}x" if ref and task.best_latency_s else "-"))
    total, ref_total = result.estimate_s, vendor.estimate_s if vendor is not None else None
    rows.append(("network (sum of count x latency)", "", "-" if total is None else f"{total * 1e3:.4f}", "",
                 str(len(result.trials)), "100" if total else "",
                 "-" if ref_total is None else f"{ref_total * 1e3:.4f}",
                 f"{ref_total / total:.2f}x" if ref_total and total else "-"))
    return format_table(rows, ("layer", "count", "best ms", "candidate", "trials", "share %", "PyTorch ms", "speed-up"))


def _count(weight: float) -> str:
    return f"{weight:g}"
