"""Renderers of a compare board (of layers or networks alike): aligned text, Markdown, CSV, JSON files, PNG plots and
a self-contained HTML page; and a run's per-task table."""

from __future__ import annotations

import base64
import csv
import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tensorgym.catalog import ABLATIONS
from tensorgym.text import format_table, slug

from tensorgym.tuner import TuningResult

from .board import REACH_FRACTION, REFERENCE, Leaderboard
from .stats import mean_ci, paired_text

_DIGITS = {"score": 2, "score(t)": 2, "AUC": 2}  # decimals of the columns that are not GFLOP/s


def _digits(metric: str) -> int:
    return _DIGITS.get(metric, 0 if metric.startswith(("to", "%")) else 1)


def _cells(board: Leaderboard, spread: str | None = None) -> tuple[list[str], list[list[str]]]:
    """The table as its header and text cells: per row its env, agent and number of seeds, then each metric as
    mean (min-max) (``spread="range"``) or mean [95 % interval of the mean] (``"ci"``); default: intervals on
    landscapes (many seeds), ranges otherwise."""
    spread = spread or ("ci" if board.landscapes else "range")
    if spread not in ("range", "ci"):
        raise ValueError(f"spread must be 'range' (min-max) or 'ci' (95 % interval of the mean), got {spread!r}")
    names = board.metric_names()
    cells = []
    for row in board.rows():
        stats = row["stats"]
        cells.append([row["env"], row["agent"], str(len(row["seeds"])) if row["seeds"] else ""]
                     + [(stats[n].format(_digits(n)) if spread == "range" else stats[n].format_ci(_digits(n)))
                        if n in stats else "" for n in names])
    return ["env", "agent", "n", *names], cells


def text_table(board: Leaderboard, spread: str | None = None) -> str:
    """The table as aligned text (GFLOP/s; ``to95%`` in measurements).

    ``spread``: ``"range"`` shows mean (min-max) over seeds, ``"ci"`` mean [95 % interval of the mean]
    (default: ``"ci"`` on landscapes, else ``"range"``).
    """
    header, cells = _cells(board, spread)
    return format_table(cells, header)


def markdown(board: Leaderboard) -> str:
    """The table in Markdown, with its caption."""
    header, cells = _cells(board)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c or " " for c in row) + " |" for row in cells]
    paired = "".join(f"\n{line}\n" for line in board.paired_vendor_lines())
    return "\n".join(lines) + f"\n\n{caption(board)}\n" + paired


def caption(board: Leaderboard) -> str:
    """What the table's columns mean."""
    unit = "GFLOP/s (GOP/s for int8 layers)" if any(label.endswith("[int8]") for label in board.labels.values()) \
        else "GFLOP/s"
    if board.landscapes:
        where = "; ".join(f"{board.labels.get(e, e)}: {f.scores.size} configs, optimum {f.optimum_gflops:.1f} "
                          f"GFLOP/s, measured on {f.cpu}" for e, f in board.landscapes.items())
        return (f"On landscapes (every config of each layer's benchmark space measured once; each run draws "
                f"its latencies from the recorded samples, its clock from the recorded build and run seconds): "
                f"{where}. Best {unit} after N trials (@N) and after T seconds of simulated tuning clock (@Ts), "
                f"final best, and final best as a share of the true optimum (%opt); mean [95 % interval of the "
                f"mean] over seeds {_seed_text(board.seeds)}, budget {board.budget}. to{round(REACH_FRACTION * 100)}%: "
                f"trials to reach {round(REACH_FRACTION * 100)} % of the run's final best. score / score(t): the "
                f"methodology score (Willemsen et al., FGCS 2024) of the agent's mean best-so-far curve over "
                f"trials / over clock, 0 = random search (the expected best of as many draws without replacement "
                f"from the whole space), 1 = the true optimum; AUC: area under the best-so-far curve as a "
                f"fraction of the optimum's.")
    return (f"Best {unit} after N measurements (@N) and after T seconds of tuning clock (@Ts), final best, "
            f"the final best config re-timed at the end in rounds interleaved with the other runs' and the "
            f"vendors' (re-timed), and measurements to reach {round(REACH_FRACTION * 100)} % of the run's "
            f"final best; mean (min-max) over seeds {board.seeds}, budget {board.budget}. "
            f"score / score(t): the methodology score (Willemsen et al., FGCS 2024) of the agent's mean "
            f"best-so-far curve over measurements / over tuning clock, 0 = random search (expected best of as "
            f"many draws from the random agent's trials), 1 = the best result any run found; "
            f"AUC: area under the best-so-far curve over the budget as a fraction of the best found's."
            + (" A network's GFLOP/s: its layers' FLOPs (count x FLOPs) over its estimated latency (the sum of count "
               "x best latency over its layers); its vendor row: PyTorch's weighted sum over the same layers."
               if any(len(r.tasks) > 1 for runs in board.results.values() for r in runs) else "")
            + (f" {board.reference_columns[0]}: trials to reach the final of {REFERENCE}'s run of the same seed, "
               f"{board.reference_columns[1]}: as a share of {REFERENCE}'s trials." if board.reference_columns
               else ""))


def _seed_text(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]} ({len(seeds)})" if len(seeds) > 4 and seeds == list(
        range(seeds[0], seeds[-1] + 1)) else str(seeds)


def write_tables(board: Leaderboard, out_dir: str | Path) -> dict[str, Path]:
    """Write compare.csv (one line per row and metric), compare.json, compare.md and curves.json (every run's
    best-so-far curve, to re-score the board without running it again); returns their paths."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    paths = {ext: Path(out_dir) / f"compare.{ext}" for ext in ("csv", "json", "md")}
    paths["curves"] = Path(out_dir) / "curves.json"
    paths["curves"].write_text(json.dumps(curves(board), separators=(",", ":")))
    with paths["csv"].open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env", "workload", "agent", "metric", "mean", "min", "max", "n", "values"])
        for row in board.rows():
            for metric, stat in row["stats"].items():
                writer.writerow([row["env"], row["workload"], row["agent"], metric, _num(stat.mean), _num(stat.min),
                                 _num(stat.max), len(stat.values), json.dumps(list(stat.values))])
    paths["json"].write_text(json.dumps(board.to_json(), indent=1))
    paths["md"].write_text(markdown(board))
    return paths


def curves(board: Leaderboard) -> dict[str, Any]:
    """Every run's best-so-far curve: for each env, agent and seed, the trials' ``[index, tuning clock s,
    best GFLOP/s]`` (a step function: the best holds until the next point), with what it was measured on."""
    runs = []
    for (env_id, agent), results in sorted(board.results.items()):
        for result in sorted(results, key=lambda r: r.seed):
            points, last = [], None
            for trial in result.trials:
                if trial.best_gflops != last or trial is result.trials[-1]:
                    points.append([trial.index, round(trial.elapsed_s, 6), round(trial.best_gflops, 6)])
                    last = trial.best_gflops
            runs.append({"env": env_id, "agent": agent, "seed": result.seed, "simulated": result.simulated,
                         "trials": len(result.trials), "best_so_far": points})
    landscapes = {env: {"cpu": facts.cpu, "optimum_gflops": facts.optimum_gflops, "digest": facts.digest}
                  for env, facts in board.landscapes.items()}
    return {"format": "tensorgym-curves", "version": 1, "columns": ["trial", "clock_s", "best_gflops"],
            "landscapes": landscapes, "runs": runs}


_VERSION = re.compile(r"v?\d+(\.\d+)+\S*|\d{4}\S*")  # 2.13.0, 0.3.27, 2024.0, 2.13.0+cpu
_LABEL_LIMIT = 34  # characters of a short vendor label before the tags in parentheses


def vendor_label(ref: dict) -> str:
    """A short name of a vendor reference for tables and legends: the library and its kernel family, short.

    ``torch 2.13.0 MKL [oneMKL 2024.0 sgemm, unknown code path, packed weights]`` with layout
    ``row-major, weights pre-packed`` is ``MKL sgemm (packed)``; ``numpy 2.1.3 [OpenBLAS 0.3.27 SkylakeX,
    2 threads]`` is ``numpy OpenBLAS SkylakeX``; a layout other than row-major is kept (``(NHWC, packed)``).
    Versions, code paths and thread counts are left to :func:`vendor_full_name`.
    """
    library = str(ref.get("library") or ref.get("backend") or "vendor")
    name, _, kernel = library.partition(" [")
    words = [w for w in name.split() if not _VERSION.fullmatch(w)]
    if len(words) > 1 and words[0] == "torch":  # PyTorch is how it is called; the library is what runs
        words = words[1:]
    family = kernel.rstrip("]").split(",")[0].split(" + ")[0].strip()
    if family.startswith("not "):  # "not oneDNN: PyTorch's own kernel"
        words, family = ["torch"], "native kernel"
    known = [w.lower() for w in words]
    kept = [w for w in family.split() if not _VERSION.fullmatch(w) and not any(k in w.lower() for k in known)]
    words += [w for w in kept if ":" in w] or kept  # oneDNN's "matmul brg_matmul:avx512_core": the implementation
    label = " ".join(words) or library
    if len(label) > _LABEL_LIMIT:
        label = label[:_LABEL_LIMIT - 3].rstrip() + "..."
    layout = str(ref.get("layout") or "")
    tags = [t for t in (layout.replace("weights pre-packed", "").replace("pre-packed", "").strip(" ,"),)
            if t and t != "row-major"]
    if "pre-packed" in layout or ref.get("weights") == "pre-packed":
        tags.append("packed")
    return label + (f" ({', '.join(tags)})" if tags else "")


def vendor_full_name(ref: dict) -> str:
    """The vendor reference's whole name: library, version, kernel family and layout."""
    return f"{ref.get('library', '')} {ref.get('layout', '')}".strip()


def _short(label: str, limit: int = 60) -> str:
    return label if len(label) <= limit else label[:limit - 3].rstrip() + "..."


_VENDOR_STYLES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 4)), (0, (8, 3)))


def plot_curves(board: Leaderboard, out_dir: str | Path) -> list[Path]:
    """One PNG per env (a layer or a network): best-so-far vs measurements and vs seconds; returns the paths.

    One line per agent (the mean over seeds, with a min-max band; a dot where the runs ended),
    vendors as horizontal lines. The title is the layer's label (or its shape, for a shape of
    your own) or the network's name; one legend names every agent and every vendor line (by its
    short :func:`vendor_label`): inside the left panel where it hides the fewest lines, or below
    the panels when it does not fit there; the y axis leaves headroom above the highest curve or
    vendor line, and the saved image is cut to what was drawn (nothing clipped).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    paths = []
    for env_id in board.env_ids:
        fig = Figure(figsize=(12, 5.2), layout="constrained")
        FigureCanvasAgg(fig)
        by_trials, by_time = fig.subplots(1, 2)
        series = [(agent, [r for r in board.results.get((env_id, agent), []) if r.trials]) for agent in board.agents]
        grid = np.linspace(0.0, max((r.trials[-1].elapsed_s for _, runs in series for r in runs), default=1.0), 400)
        top = 0.0
        for i, (agent, runs) in enumerate(series):
            if not runs:
                continue
            color = f"C{i % 10}"
            xs = np.arange(1, max(len(r.trials) for r in runs) + 1)
            curves = np.array([[r.best_at(trials=int(x)) for x in xs] for r in runs], dtype=float)
            _band(by_trials, xs, curves, color, f"{agent} (n={len(runs)})")
            _band(by_time, grid, np.array([[r.best_at(seconds=float(t)) for t in grid] for r in runs]), color, None)
            top = max(top, float(curves.max()))
            # Where the runs ended (mean over seeds): the curve is flat after it because the run was over.
            by_time.plot(np.mean([r.trials[-1].elapsed_s for r in runs]),
                         np.mean([r.trials[-1].best_gflops for r in runs]), marker="o", color=color)
        for j, ref in enumerate(r for r in board.vendor.get(env_id, []) if r.get("gflops")):
            top = max(top, float(ref["gflops"]))
            style = {"color": ("0.25", "0.5")[j // len(_VENDOR_STYLES) % 2],
                     "linestyle": _VENDOR_STYLES[j % len(_VENDOR_STYLES)]}
            for ax, label in ((by_trials, f"vendor: {vendor_label(ref)}"), (by_time, None)):  # named once
                ax.axhline(ref["gflops"], linewidth=1.2, label=label, **style)
        fig.suptitle(plot_title(env_id, board.labels.get(env_id, "")), fontsize=12)
        for ax, xlabel in ((by_trials, "measurements"), (by_time, "tuning clock (s)")):
            ax.set(xlabel=xlabel, ylabel="best GFLOP/s so far", ylim=(0, 1.12 * top if top > 0 else 1.0))
            ax.grid(alpha=0.3)
        _legend(fig, by_trials)
        path = Path(out_dir) / "plots" / f"{slug(env_id)}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
        paths.append(path)
    return paths


def _legend(fig, ax) -> None:
    """One legend for the whole figure, naming ``ax``'s lines (the figure's series, one entry each).

    Inside ``ax``, where it hides the fewest lines, when it fits there in one column; otherwise
    below the panels, inside the figure, in as many columns (up to 4) as fit its width.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    labels = [_short(label) for label in labels]
    fig.draw_without_rendering()  # the layout, so that the extents below are the drawn ones
    renderer = fig.canvas.get_renderer()
    legend = ax.legend(handles, labels, loc="best", fontsize=7.5, framealpha=0.9, borderaxespad=0.4,
                       handlelength=2.6)
    box, room = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    if box.width <= 0.9 * room.width and box.height <= 0.6 * room.height:
        return
    legend.remove()
    for ncols in range(min(len(labels), 4), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=8, frameon=False,
                            handlelength=2.6)
        if ncols == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return
        legend.remove()


def plot_title(env_id: str, label: str, limit: int = 70) -> str:
    """A short title: the layer's label for a suite layer, the shape for a shape of your own."""
    if "[" in env_id:  # a parametric id with its shape, e.g. tensorgym/Matmul-v0[M=64,N=32,K=48]
        op = env_id.split("/")[-1].split("-")[0]
        title = f"{op} {env_id[env_id.index('[') + 1:].rstrip(']').replace(',', ', ')}"
    else:
        title = f"{label} ({env_id})" if label else env_id
    return title if len(title) <= limit else title[:limit - 3] + "..."


def _band(ax, xs: np.ndarray, curves: np.ndarray, color: str, label: str | None) -> None:
    """Mean over runs (rows) with a min-max band."""
    ax.plot(xs, curves.mean(axis=0), color=color, label=label, linewidth=1.6, drawstyle="steps-post")
    if len(curves) > 1:
        ax.fill_between(xs, curves.min(axis=0), curves.max(axis=0), color=color, alpha=0.18, step="post")


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# The page fits the window: the table's text columns wrap (a vendor row names its short label, the full
# name is its tooltip and a footnote), a value wraps between its mean and its (min-max), and a table still
# too wide scrolls in its own box, never the page; the plots shrink to the window's width.
_PAGE_STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #1a1a1a; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; } h2 { font-size: 17px; margin: 28px 0 8px; }
p, ol { max-width: 1100px; line-height: 1.4; } .settings { color: #444; } .notes { font-size: 12px; color: #444; }
.table { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: 8px 0; }
th, td { border: 1px solid #c8c8c8; padding: 3px 6px; text-align: right; white-space: normal; }
th { background: #eef0f3; white-space: nowrap; }
.text { text-align: left; overflow-wrap: anywhere; min-width: 7em; max-width: 22em; }
tr.vendor td { color: #555; font-style: italic; } .range { white-space: nowrap; }
figure { margin: 12px 0 24px; max-width: 100%; } figcaption { font-size: 13px; color: #444; }
img { display: block; max-width: 100%; height: auto; }
"""


def _value_html(value: str) -> str:
    """A table value whose range (``(min-max)``, ``[n/m]``) may wrap below its mean, but not within itself."""
    mean, sep, rest = value.partition(" ")
    return f'{html.escape(mean)} <span class="range">{html.escape(rest)}</span>' if sep else html.escape(value)


def score_headline(board: Leaderboard) -> tuple[list[str], list[list[str]]] | None:
    """The board's headline: agents x envs, each cell the methodology score, mean [95 % interval] over seeds
    (None where no env has a score: no random runs and no landscape)."""
    columns = [e for e in board.env_ids if board.methodology_reference(e) is not None]
    if not columns:
        return None
    rows = []
    for agent in board.agents:
        cells = [agent]
        for env_id in columns:
            mean, low, high = mean_ci(board.seed_scores(env_id, agent))
            cells.append("-" if mean is None else f"{mean:.2f}" + ("" if low is None else f" [{low:.2f}, {high:.2f}]"))
        rows.append(cells)
    return ["agent", *(board.labels.get(e) or e for e in columns)], rows


def ablation_differences(board: Leaderboard) -> tuple[list[str], list[list[str]]] | None:
    """What each learned agent's model adds (:data:`~tensorgym.catalog.ABLATIONS`): its score minus its
    ablation's, seed by seed, per env with a score (None where the board holds no agent with its ablation)."""
    columns = [e for e in board.env_ids if board.methodology_reference(e) is not None]
    pairs = [(a, b) for a, b in ABLATIONS.items() if a in board.agents and b in board.agents]
    if not columns or not pairs:
        return None
    rows = [[f"{a} - {b}"] + [paired_text(board.paired_scores(e, a, b).to_json()) for e in columns] for a, b in pairs]
    return ["difference", *(board.labels.get(e) or e for e in columns)], rows


def _summary_table(table_id: str, header: list[str], rows: list[list[str]]) -> str:
    """A small table of the page's top: names in the first column, ``mean [interval] ...`` cells after it."""
    esc = html.escape
    return (f'<div class="table"><table id="{table_id}"><thead><tr>'
            + "".join(f'<th class="text">{esc(h)}</th>' if i == 0 else f"<th>{esc(h)}</th>"
                      for i, h in enumerate(header)) + "</tr></thead><tbody>"
            + "".join('<tr class="agent">' + "".join(f'<td class="text">{esc(v)}</td>' if i == 0 else
                                                     f"<td>{_value_html(v)}</td>" for i, v in enumerate(row)) + "</tr>"
                      for row in rows) + "</tbody></table></div>")


def html_page(board: Leaderboard, plots: Sequence[str | Path] = ()) -> str:
    """The board as one self-contained HTML page: settings, the table, its caption, what the scores are
    measured against, failed runs, and the ``plots`` embedded as base64 PNGs (no script, no external file)."""
    header, cells = _cells(board)
    esc = html.escape
    vendors = {(env_id, f"vendor: {ref['library']} {ref['layout']}".rstrip()): ref for env_id in board.env_ids
               for ref in board.vendor.get(env_id, []) if ref.get("gflops") is not None}  # as board.rows() names them
    rows, notes = [], {}
    for row, values in zip(board.rows(), cells):
        kind = "vendor" if row["agent"].startswith("vendor:") else "agent"
        ref = vendors.get((row["env"], row["agent"]))
        tds = []
        for i, v in enumerate(values):
            if i == 1 and ref is not None:  # the vendor's short label; its full name in a tooltip and a note
                short, full = vendor_label(ref), vendor_full_name(ref)
                notes.setdefault(short, set()).add(full)
                tds.append(f'<td class="text" title="{esc(full)}">vendor: {esc(short)}</td>')
            else:
                tds.append(f'<td class="text">{esc(v)}</td>' if i < 2 else f"<td>{_value_html(v)}</td>")
        rows.append(f'<tr class="{kind}">{"".join(tds)}</tr>')
    vendor_notes = "".join(f"<li><b>{esc(short)}</b>: {esc('; '.join(sorted(fulls)))}</li>"
                           for short, fulls in notes.items())
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
    headline, ablations = score_headline(board), ablation_differences(board)
    headline_html = "" if headline is None else (
        '<h2>Methodology score</h2><p class="notes">Against the true optimum on a landscape, else the best known; '
        "0 is random search's expected curve, 1 the optimum from the first trial; mean [95 % interval] over "
        "seeds. The detail follows.</p>" + _summary_table("headline", *headline)
        + ("" if ablations is None else
           '<p class="notes">What the model adds: the score minus the ablation\'s, seed by seed (an agent and its '
           "random-model ablation draw each seed's initial sample alike); mean [95 % interval], seeds won / "
           "paired, Wilcoxon signed-rank p.</p>" + _summary_table("ablations", *ablations)))
    settings = (f"{len(board.env_ids)} env(s), agents {', '.join(board.agents)}, seeds {_seed_text(board.seeds)}, "
                f"budget {board.budget} measurements" + (f", {board.time_budget:g} s of tuning clock"
                                                         if board.time_budget else "") + ".")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tensorgym leaderboard</title>
<style>{_PAGE_STYLE}</style></head>
<body>
<h1>tensorgym leaderboard</h1>
<p class="settings">{esc(settings)}</p>
{headline_html}
{"<h2>Detail</h2>" if headline_html else ""}
<div class="table"><table id="leaderboard"><thead><tr>{
    "".join(f'<th class="text">{esc(h)}</th>' if i < 2 else f"<th>{esc(h)}</th>" for i, h in enumerate(header))
}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table></div>
<p class="caption">{esc(caption(board))}</p>
{"".join(f'<p class="notes paired">{esc(line)}</p>' for line in board.paired_vendor_lines())}
{f'<p class="notes">Vendor references (library, version, kernel family, layout):</p><ol id="vendors" class="notes">'
 f'{vendor_notes}</ol>' if vendor_notes else ""}
<h2>What the scores are measured against</h2>
<div class="table"><table id="references"><thead><tr><th class="text">env</th><th>best known GFLOP/s</th>
<th>random trials</th><th>random s/trial</th><th>trials scored</th></tr></thead>
<tbody>
{chr(10).join(references)}
</tbody></table></div>
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


def task_table(result: TuningResult, vendor: dict | None = None) -> str:
    """A run per task (a network's layers; a layer's one): count, best latency, the candidate it came from, trials,
    share of the run's estimated latency (and, given the vendor reference of the run's tasks, the vendor's latency
    and the speed-up over it), then the totals."""
    layers = vendor.get("layers", []) if vendor else []
    rows = []
    for i, task in enumerate(result.tasks):
        ref = layers[i].get("latency_s") if i < len(layers) else None
        if task.weight <= 0:
            rows.append((task.label, f"{task.weight:g}", "-", "-", "0", "-", "-", "-"))
            continue
        share = result.share(i)
        rows.append((
            task.label, f"{task.weight:g}", "-" if task.best_latency_s is None else f"{task.best_latency_s * 1e3:.4f}",
            task.best_candidate_name or "-", str(task.trials), "-" if share is None else f"{share * 100:.1f}",
            "-" if ref is None else f"{ref * 1e3:.4f}",
            f"{ref / task.best_latency_s:.2f}x" if ref and task.best_latency_s else "-"))
    total, ref_total = result.best_latency_s, vendor.get("latency_s") if vendor else None
    rows.append(("total (sum of count x latency)", "", "-" if total is None else f"{total * 1e3:.4f}", "",
                 str(len(result.trials)), "100" if total else "",
                 "-" if ref_total is None else f"{ref_total * 1e3:.4f}",
                 f"{ref_total / total:.2f}x" if ref_total and total else "-"))
    return format_table(rows, ("layer", "count", "best ms", "candidate", "trials", "share %", "vendor ms", "speed-up"))
