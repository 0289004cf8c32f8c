"""Renderers of network runs: a run's per-layer table; a compare-network board as text, Markdown, CSV, JSON, PNG."""

from __future__ import annotations

from pathlib import Path

from tensorgym.network_result import NetworkResult
from tensorgym.text import format_table

from .network_board import NetworkBoard
from .network_vendor import NetworkVendor
from .render import (_figure, _label_axes, _plot_runs, _reference_line, _save, board_cells, markdown_table,
                     vendor_label, write_board_files)


def _cells(board: NetworkBoard) -> tuple[list[str], list[list[str]]]:
    return board_cells(board, ["scheduler"], lambda row: [row["scheduler"]],
                       lambda n: 0 if n in ("to-RR", "%RR") else 2 if n == "xPyTorch" else 3)


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
    return markdown_table(*_cells(board), caption(board))


def write_tables(board: NetworkBoard, out_dir: str | Path) -> dict[str, Path]:
    """Write compare_network.csv, .json and .md; returns their paths."""
    return write_board_files(board, Path(out_dir) / "compare_network", ["network", "scheduler"],
                             lambda row: [board.network, row["scheduler"]], markdown(board))


def plot(board: NetworkBoard, out_dir: str | Path) -> Path:
    """compare_network.png: the estimated network latency vs trials and vs seconds, one line per scheduler
    (mean over seeds, min-max band; log scale), PyTorch's weighted sum as a horizontal line; one legend
    (inside the left panel, or below both when it does not fit there) names them all, and the image is
    cut to what was drawn (nothing clipped)."""
    fig, by_trials, by_time = _figure()
    series = [(scheduler, board.results.get(scheduler, [])) for scheduler in board.schedulers]
    _plot_runs(by_trials, by_time, series, lambda r, **at: _ms_or_nan(r.estimate_at(**at)))
    if board.vendor is not None and board.vendor.estimate_s:
        _reference_line((by_trials, by_time), board.vendor.estimate_s * 1e3,
                        f"PyTorch weighted sum ({vendor_libraries(board.vendor)})", color="0.3", linestyle="--")
    fig.suptitle(f"{board.network}: estimated network latency ({board.space} space"
                 f"{f', {board.dtype}' if board.dtype else ''})", fontsize=12)
    _label_axes((by_trials, by_time), "trials", which="both", ylabel="network latency (ms)", yscale="log")
    return _save(fig, by_trials, Path(out_dir) / "compare_network.png")


def vendor_libraries(vendor: NetworkVendor) -> str:
    """The libraries PyTorch ran over the network's layers, short (``oneDNN, MKL``): a legend's label."""
    names = [vendor_label({"library": layer["library"]}).split()[0] for layer in vendor.layers if layer.get("library")]
    return ", ".join(dict.fromkeys(names)) or "torch"


def _ms_or_nan(value: float | None) -> float:
    return float("nan") if value is None else value * 1e3


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
