"""Draw the pictures of the docs into docs/_static/figures/ (the Sphinx build runs this when one is missing).

    python docs/_scripts/figures.py            # all three
    python docs/_scripts/figures.py dataflow   # one: leaderboard, landscape-histogram, dataflow

* ``leaderboard.png``: the best-so-far curves ``tensorgym compare`` draws, from a landscape run (random, GA and
  DGD on ResNet-50 R5, 128 trials, 5 seeds: about 20 s, nothing compiled);
* ``landscape-histogram.png``: the GFLOP/s of every config of the shipped tiles landscapes, and of the uniform
  sample of R5's whole tiles space (``tensorgym landscape sample``) where one is shipped;
* ``dataflow.png``: the path of a config from the env to the database (matplotlib boxes and arrows).

Numbers quoted in the docs about the histogram come from ``landscape_summary()`` (printed when run).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "_static" / "figures"
LANDSCAPES = REPO / "tensorgym" / "data" / "landscapes"


def leaderboard() -> Path:
    from tensorgym.baselines.compare import compare

    with tempfile.TemporaryDirectory() as tmp:
        compare(["Conv2d-ResNet-R5-v0"], agents="random,ga,dgd", budget=128, seeds=5, db=f"{tmp}/runs.db",
                out_dir=f"{tmp}/out", backend="landscape", progress=False, vendor=False)
        target = OUT / "leaderboard.png"
        shutil.copyfile(f"{tmp}/out/plots/Conv2d-ResNet-R5-v0.png", target)
    return target


def _folder() -> Path:
    return sorted(p for p in LANDSCAPES.iterdir() if p.is_dir())[0]


def landscape_summary() -> list[dict]:
    """Per shipped tiles landscape (and full-space sample): configs, optimum, median, and the expected share of
    the file's best that random search reaches after 32 / 128 / 512 distinct draws."""
    from tensorgym.landscape import Landscape

    folder = _folder()
    rows = []
    files = sorted(folder.glob("*-tiles.json.gz")) + sorted((folder / "samples").glob("*.json.gz"))
    for path in files:
        land = Landscape.load(path)
        g = np.asarray(land.scores, dtype=float)
        rng = np.random.default_rng(0)
        share = {n: float(np.mean([g[rng.choice(len(g), n, replace=False)].max() for _ in range(400)]) / g.max())
                 for n in (32, 128, 512) if n < len(g)}
        rows.append({"name": path.name.split("-")[0] + (" (whole-space sample)" if path.parent.name == "samples"
                                                         else ""),
                     "cpu": folder.name, "configs": len(g), "optimum": float(g.max()),
                     "median": float(np.median(g[g > 0])), "random_share": share, "scores": g})
    return rows


def landscape_histogram() -> Path:
    rows = landscape_summary()
    ncols = 3
    nrows = -(-len(rows) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(10.5, 3.0 * nrows), squeeze=False)
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    for ax, row in zip(axes.flat, rows):
        g = row["scores"]
        sample = "sample" in row["name"]
        ax.hist(g[g > 0], bins=40, color="tab:orange" if sample else "tab:blue")
        ax.axvline(row["optimum"], color="k", lw=1, ls="--")
        ax.set_title(row["name"].replace(" (whole-space sample)", "\nwhole tiles space, uniform sample"),
                     fontsize=9)
        ax.set_xlabel("GFLOP/s")
        ax.text(0.02, 0.95, f"{row['configs']} configs\nbest {row['optimum']:.0f}\nmedian {row['median']:.0f}",
                transform=ax.transAxes, va="top", fontsize=8, bbox={"fc": "white", "alpha": 0.8, "lw": 0})
    for ax in axes[:, 0]:
        ax.set_ylabel("configs")
    fig.suptitle(f"Shipped tiles landscapes of {rows[0]['cpu']}: GFLOP/s of every config (dashed: the best)",
                 fontsize=10)
    fig.tight_layout()
    target = OUT / "landscape-histogram.png"
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target


def dataflow() -> Path:
    boxes = [  # (label, detail, x, y)
        ("Env", "gym.make(id)\nreset / step", 0.5, 2.0),
        ("Strategy", "agents: ask(n) / tell\n(random, ga, dgd, ...)", 0.5, 0.6),
        ("Tuner", "one loop: budget,\nclock, callbacks", 2.5, 0.6),
        ("Space", "geometry: sample,\nneighbours, hops,\nfeatures, masks", 2.5, 2.0),
        ("Evaluator", "database first,\nthen measure\n(live | replay | landscape)", 4.5, 1.3),
        ("KernelBuilder", "config -> TVM IRModule\n(space.builder())", 6.5, 2.0),
        ("Measurer", "builder pool:\ncompiles in parallel", 8.5, 2.0),
        ("Runner", "one process: checks\nagainst NumPy, times\n(local | RPC | CUDA)", 8.5, 0.6),
        ("Database", "SQLite records:\nstatus, latency,\nsamples, GFLOP/s", 6.5, 0.6),
    ]
    arrows = [("Env", "Space", "action -> config"), ("Strategy", "Tuner", "configs"), ("Tuner", "Evaluator", ""),
              ("Space", "Evaluator", "config"), ("Evaluator", "KernelBuilder", "new config"),
              ("KernelBuilder", "Measurer", "IRModule"), ("Measurer", "Runner", "built kernel"),
              ("Runner", "Database", "Record"), ("Database", "Evaluator", "records"),
              ("Tuner", "Strategy", "")]
    pos = {name: (x, y) for name, _, x, y in boxes}
    fig, ax = plt.subplots(figsize=(11, 3.6))
    for name, detail, x, y in boxes:
        ax.add_patch(matplotlib.patches.FancyBboxPatch((x - 0.8, y - 0.45), 1.6, 0.9,
                                                       boxstyle="round,pad=0.02", fc="#e8f0fb", ec="#3465a4"))
        ax.text(x, y + 0.25, name, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x, y - 0.1, detail, ha="center", va="center", fontsize=7.2)
    drawn = set()
    for a, b, label in arrows:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        if (b, a) in drawn:  # the reply of a pair: offset so both arrows show
            y0, y1 = y0 - 0.15, y1 - 0.15
        drawn.add((a, b))
        dx, dy = x1 - x0, y1 - y0
        length = max((dx ** 2 + dy ** 2) ** 0.5, 1e-9)
        ux, uy = abs(dx) / length, abs(dy) / length
        shrink = min(0.84 / ux if ux > 1e-9 else 1e9, 0.49 / uy if uy > 1e-9 else 1e9)
        sx, sy = x0 + dx / length * shrink, y0 + dy / length * shrink
        ex, ey = x1 - dx / length * shrink, y1 - dy / length * shrink
        ax.annotate("", xy=(ex, ey), xytext=(sx, sy), arrowprops={"arrowstyle": "->", "color": "#333", "lw": 1.2})
        if label:
            ax.text((sx + ex) / 2, (sy + ey) / 2 + 0.1, label, ha="center", va="bottom", fontsize=7, color="#555")
    ax.set_xlim(-0.4, 9.4)
    ax.set_ylim(0.0, 2.6)
    ax.axis("off")
    ax.set_title("A config's way from the agent to the database (tensorgym's data flow)", fontsize=10)
    fig.tight_layout()
    target = OUT / "dataflow.png"
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target


FIGURES = {"leaderboard": leaderboard, "landscape-histogram": landscape_histogram, "dataflow": dataflow}


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in argv or list(FIGURES):
        print(FIGURES[name]().relative_to(REPO))
    if not argv or "landscape-histogram" in argv:
        for row in landscape_summary():
            shares = ", ".join(f"@{n} {s:.3f}" for n, s in row["random_share"].items())
            print(f"{row['name']}: {row['configs']} configs, best {row['optimum']:.1f}, median {row['median']:.1f}; "
                  f"random search's expected share of the file's best: {shares}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
