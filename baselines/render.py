"""Renderers of a compare board: aligned text, Markdown, CSV, JSON files, PNG plots and a self-contained HTML page."""

from __future__ import annotations

import base64
import csv
import html
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tensorgym.text import format_table, slug

from .board import REACH_FRACTION, Leaderboard

_DIGITS = {"score": 2, "score(t)": 2, "AUC": 2}  # decimals of the columns that are not GFLOP/s


def _cells(board: Leaderboard, spread: str = "range") -> tuple[list[str], list[list[str]]]:
    if spread not in ("range", "ci"):
        raise ValueError(f"spread must be 'range' (min-max) or 'ci' (95 % interval of the mean), got {spread!r}")
    names = board.metric_names()
    header = ["env", "agent", "n"] + names
    cells = []
    for row in board.rows():
        stats = row["stats"]
        digits = {n: _DIGITS.get(n, 0 if n.startswith("to") else 1) for n in names}
        cells.append([row["env"], row["agent"], str(len(row["seeds"])) if row["seeds"] else ""]
                     + [(stats[n].format(digits[n]) if spread == "range" else stats[n].format_ci(digits[n]))
                        if n in stats else "" for n in names])
    return header, cells


def text_table(board: Leaderboard, spread: str = "range") -> str:
    """The table as aligned text (GFLOP/s; ``to95%`` in measurements).

    ``spread``: ``"range"`` shows mean (min-max) over seeds, ``"ci"`` mean [95 % interval of the mean].
    """
    header, cells = _cells(board, spread)
    return format_table(cells, header)


def markdown(board: Leaderboard) -> str:
    """The table in Markdown, with its caption."""
    header, cells = _cells(board)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c or " " for c in row) + " |" for row in cells]
    note = f"\n{caption(board)}"
    return "\n".join(lines) + "\n" + note + "\n"


def caption(board: Leaderboard) -> str:
    """What the table's columns mean."""
    unit = "GFLOP/s (GOP/s for int8 layers)" if any(label.endswith("[int8]") for label in board.labels.values()) \
        else "GFLOP/s"
    return (f"Best {unit} after N measurements (@N) and after T seconds of tuning clock (@Ts), final best, "
            f"the final best config re-timed at the end in rounds interleaved with the other runs' and the "
            f"vendors' (re-timed), and measurements to reach {round(REACH_FRACTION * 100)} % of the run's "
            f"final best; mean (min-max) over seeds {board.seeds}, budget {board.budget}. "
            f"score / score(t): the methodology score (Willemsen et al., FGCS 2024) of the agent's median "
            f"best-so-far curve over measurements / over tuning clock, 0 = random search (expected best of as "
            f"many draws from the random agent's trials), 1 = the best result any run found; "
            f"AUC: area under the best-so-far curve over the budget as a fraction of the best found's.")


def write_tables(board: Leaderboard, out_dir: str | Path) -> dict[str, Path]:
    """Write compare.csv, compare.json and compare.md; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "compare.csv", "json": out / "compare.json", "md": out / "compare.md"}
    with paths["csv"].open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"])
        for row in board.rows():
            for metric, stat in row["stats"].items():
                writer.writerow([row["env"], row["workload"], row["agent"], metric, _num(stat.mean),
                                 _num(stat.min), _num(stat.max), len(stat.values), json.dumps(list(stat.values))])
    paths["json"].write_text(json.dumps(board.to_json(), indent=1))
    paths["md"].write_text(markdown(board))
    return paths


def plot_curves(board: Leaderboard, out_dir: str | Path) -> list[Path]:
    """One PNG per env: best-so-far vs measurements and vs seconds; returns the paths.

    The title is the layer's label (or its shape, for a shape of your own); one
    legend sits below both panels, outside the data; the y axis leaves
    headroom above the highest curve or vendor line.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(out_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for env_id in board.env_ids:
        fig = Figure(figsize=(12, 5.2), layout="constrained")
        FigureCanvasAgg(fig)
        by_trials, by_time = fig.subplots(1, 2)
        horizon = max((t.elapsed_s for a in board.agents for r in board.results.get((env_id, a), [])
                       for t in r.trials), default=1.0)
        grid = np.linspace(0.0, horizon, 400)
        top = 0.0
        for i, agent in enumerate(board.agents):
            runs = [r for r in board.results.get((env_id, agent), []) if r.trials]
            if not runs:
                continue
            color = f"C{i % 10}"
            n = max(len(r.trials) for r in runs)
            xs = np.arange(1, n + 1)
            curves = np.array([[r.best_at(trials=int(x)) for x in xs] for r in runs])
            _band(by_trials, xs, curves, color, f"{agent} (n={len(runs)})")
            top = max(top, float(curves.max()))
            curves = np.array([[r.best_at(seconds=float(t)) for t in grid] for r in runs])
            _band(by_time, grid, curves, color, None)
            # Where the runs ended (mean over seeds): the curve is flat after it because the run was over.
            by_time.plot(np.mean([r.trials[-1].elapsed_s for r in runs]),
                         np.mean([r.trials[-1].best_gflops for r in runs]), marker="o", color=color)
        for j, ref in enumerate(r for r in board.vendor.get(env_id, []) if r.get("gflops")):
            top = max(top, float(ref["gflops"]))
            for ax, label in ((by_trials, f"{ref['library']} {ref['layout']}"), (by_time, None)):
                ax.axhline(ref["gflops"], color="0.3", linestyle=("--", ":", "-.")[j % 3], linewidth=1.2,
                           label=label)
        fig.suptitle(plot_title(env_id, board.labels.get(env_id, "")), fontsize=12)
        by_trials.set(xlabel="measurements", ylabel="best GFLOP/s so far")
        by_time.set(xlabel="tuning clock (s)", ylabel="best GFLOP/s so far")
        for ax in (by_trials, by_time):
            ax.grid(alpha=0.3)
            ax.set_ylim(0, 1.12 * top if top > 0 else 1.0)
        handles, labels = by_trials.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize=9,
                       frameon=False)
        path = out / f"{slug(env_id)}.png"
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths


def plot_title(env_id: str, label: str, limit: int = 70) -> str:
    """A short title: the layer's label for a suite layer, the shape for a shape of your own."""
    if "[" in env_id:  # a parametric id with its shape, e.g. tensorgym/Matmul-v0[M=64,N=32,K=48]
        op = env_id.split("/")[-1].split("-")[0]
        title = f"{op} {env_id[env_id.index('[') + 1:].rstrip(']').replace(',', ', ')}"
    else:
        title = f"{label} ({env_id})" if label else env_id
    return title if len(title) <= limit else title[:limit - 3] + "..."


def _band(ax, xs: np.ndarray, curves: np.ndarray, color: str, label: str | None) -> None:
    ax.plot(xs, curves.mean(axis=0), color=color, label=label, linewidth=1.6, drawstyle="steps-post")
    if len(curves) > 1:
        ax.fill_between(xs, curves.min(axis=0), curves.max(axis=0), color=color, alpha=0.18, step="post")


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


_PAGE_STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #1a1a1a; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; } h2 { font-size: 17px; margin: 28px 0 8px; }
p { max-width: 1100px; line-height: 1.4; } .settings { color: #444; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #c8c8c8; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #eef0f3; } .text { text-align: left; } tr.vendor td { color: #555; font-style: italic; }
figure { margin: 12px 0 24px; } figcaption { font-size: 13px; color: #444; }
img { display: block; max-width: none; }
"""


def html_page(board: Leaderboard, plots: Sequence[str | Path] = ()) -> str:
    """The board as one self-contained HTML page: settings, the table, its caption, what the scores are
    measured against, failed runs, and the ``plots`` embedded as base64 PNGs (no script, no external file)."""
    header, cells = _cells(board)
    esc = html.escape
    rows = []
    for row, values in zip(board.rows(), cells):
        kind = "vendor" if row["agent"].startswith("vendor:") else "agent"
        tds = "".join(f'<td class="text">{esc(v)}</td>' if i < 2 else f"<td>{esc(v)}</td>"
                      for i, v in enumerate(values))
        rows.append(f'<tr class="{kind}">{tds}</tr>')
    references = []
    for env_id in board.env_ids:
        ref = board.methodology_reference(env_id)
        values = ([f"{ref.optimum:.1f}", str(ref.sample.size), f"{ref.seconds_per_trial:.3f}", str(ref.trials)]
                  if ref is not None else ["-", "-", "-", "-"])
        references.append(f'<tr><td class="text">{esc(env_id)}</td>' + "".join(f"<td>{v}</td>" for v in values)
                          + "</tr>")
    figures = []
    for path in plots:
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        name = Path(path).stem
        figures.append(f'<figure><img id="plot-{esc(name)}" alt="best-so-far curves of {esc(name)}" '
                       f'src="data:image/png;base64,{data}"><figcaption>{esc(name)}</figcaption></figure>')
    errors = "".join(f"<li>{esc(e['agent'])} on {esc(e['env'])} (seed {e['seed']}): "
                     f"{esc(e['error'].splitlines()[0] if e['error'] else '')}</li>" for e in board.errors)
    settings = (f"{len(board.env_ids)} env(s), agents {', '.join(board.agents)}, seeds {board.seeds}, "
                f"budget {board.budget} measurements" + (f", {board.time_budget:g} s of tuning clock"
                                                         if board.time_budget else "") + ".")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tensorgym leaderboard</title>
<style>{_PAGE_STYLE}</style></head>
<body>
<h1>tensorgym leaderboard</h1>
<p class="settings">{esc(settings)}</p>
<table id="leaderboard"><thead><tr>{"".join(f'<th class="text">{esc(h)}</th>' if i < 2 else f"<th>{esc(h)}</th>"
                                           for i, h in enumerate(header))}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<p class="caption">{esc(caption(board))}</p>
<h2>What the scores are measured against</h2>
<table id="references"><thead><tr><th class="text">env</th><th>best known GFLOP/s</th><th>random trials</th>
<th>random s/trial</th><th>trials scored</th></tr></thead>
<tbody>
{chr(10).join(references)}
</tbody></table>
{f"<h2>Failed runs</h2><ul>{errors}</ul>" if errors else ""}
{"<h2>Best so far</h2>" if figures else ""}
{chr(10).join(figures)}
</body></html>
"""


def write_html(board: Leaderboard, out_dir: str | Path, plots: Sequence[str | Path] = ()) -> Path:
    """Write ``compare.html`` (:func:`html_page`) into ``out_dir``; returns its path."""
    path = Path(out_dir) / "compare.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_page(board, plots), encoding="utf-8")
    return path
