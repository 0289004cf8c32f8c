"""The HTML leaderboard fits a 1,400 px window: no horizontal scroll, with the vendors' long names.

A vendor row used to name the vendor in full (``torch 2.13.0 MKL [oneMKL 2024.0 sgemm, unknown code
path, packed weights] row-major, weights pre-packed``) in cells that never wrapped, so the last columns
(``to95%``, ``score``, ``score(t)``, ``AUC``) were off-screen. A vendor row now shows a short label, its
full name as a tooltip and in a footnote, and the page wraps to the window's width.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from tensorgym.baselines.board import Leaderboard
from tensorgym.baselines.render import html_page, plot_curves, write_html

from test_html_page import CHROMIUM, _chromium, _run  # noqa: I001 - tests/ is on sys.path (conftest)

LONG = {"library": "torch 2.13.0 MKL [oneMKL 2024.0 sgemm, unknown code path, packed weights]",
        "layout": "row-major, weights pre-packed", "backend": "mkl", "weights": "pre-packed", "gflops": 161.25}
FULL = f"{LONG['library']} {LONG['layout']}"
WIDTH = 1400

# Measures the laid-out page and writes the numbers into the DOM (the page itself has no script).
_MEASURE = """<script>
window.addEventListener("load", () => {
  const page = document.documentElement, table = document.getElementById("leaderboard");
  const box = table.parentElement, right = e => e.getBoundingClientRect().right;
  document.body.setAttribute("data-metrics", JSON.stringify({
    inner: window.innerWidth, page: [page.scrollWidth, page.clientWidth], box: [box.scrollWidth, box.clientWidth],
    table: [table.scrollWidth, table.clientWidth, right(table)],
    cells: Math.max(...[...table.querySelectorAll("td, th")].map(right)),
    images: [...document.images].map(right)}));
});
</script></body>"""


def _board() -> Leaderboard:
    """Every default column (4 trial points, 2 time points, ...), three agents and the long vendor name."""
    env_id = "Conv2d-ResNet18-C7-v0[dtype=int8]"
    board = Leaderboard(env_ids=[env_id], agents=["random", "optuna", "metaschedule"], seeds=[0, 1, 2], budget=128)
    rng = np.random.default_rng(0)
    for agent, scale in (("random", 120.0), ("optuna", 150.0), ("metaschedule", 170.0)):
        board.results[(env_id, agent)] = [_run(agent, list(scale * rng.random(128)), s) for s in (0, 1, 2)]
    board.vendor[env_id] = [LONG, {"library": "numpy 2.1.3 [openblas 0.3.27 SkylakeX, 2 threads]",
                                   "layout": "row-major", "weights": "per call", "gflops": 90.5}]
    return board


class _VendorCells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str | None, str]] = []
        self._title: str | None = None
        self._in = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and attrs.get("title"):
            self._in, self._title = True, attrs["title"]

    def handle_endtag(self, tag):
        if tag == "td":
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.cells.append((self._title, data))


def test_vendor_rows_show_a_short_label_with_the_full_name_as_tooltip_and_footnote():
    text = html_page(_board())
    parser = _VendorCells()
    parser.feed(text)
    assert parser.cells[0] == (FULL, "vendor: MKL sgemm (packed)")
    assert parser.cells[1][1] == "vendor: numpy openblas SkylakeX"
    assert re.search(r'<ol id="vendors"[^>]*><li><b>MKL sgemm \(packed\)</b>: ' + re.escape(FULL), text)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
def test_the_page_has_no_horizontal_scroll_at_1400_px(tmp_path):
    board = _board()
    plots = plot_curves(board, tmp_path)
    path = write_html(board, tmp_path, plots)
    measured = tmp_path / "measured.html"
    measured.write_text(path.read_text().replace("</body>", _MEASURE), encoding="utf-8")
    dom = _chromium(["--dump-dom", f"--window-size={WIDTH},900", measured.as_uri()])
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-metrics="([^"]*)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    metrics = json.loads(found.group(1).replace("&quot;", '"'))
    assert metrics["inner"] == WIDTH
    assert metrics["page"][0] <= metrics["page"][1], metrics  # the page does not scroll sideways
    assert metrics["box"][0] <= metrics["box"][1], metrics  # nor does the table's own box
    assert metrics["table"][0] <= metrics["table"][1] and metrics["table"][2] <= WIDTH, metrics
    assert metrics["cells"] <= WIDTH, metrics  # every column, AUC included, is on the screen
    assert metrics["images"] and max(metrics["images"]) <= WIDTH, metrics
