"""The HTML leaderboard page: self-contained, and rendered by a real headless browser (Debian's chromium).

The browser test is skipped, with the reason, where no ``chromium`` is installed
(CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from fakes import synthetic_result

from tensorgym.baselines.board import Leaderboard
from tensorgym.baselines.render import html_page, plot_curves, write_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless, as root, offline: no sandbox (root), no GPU, no network services, a fresh profile per call.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--mute-audio", "--disable-dev-shm-usage", "--virtual-time-budget=5000"]
LINE_RGB = (0x1F, 0x77, 0xB4)  # matplotlib's first colour: the first agent's curve in every plot


_run = synthetic_result


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("page")
    board = Leaderboard(env_ids=["E1", "tensorgym/Matmul-v0[M=8,N=8,K=8]"], agents=["random", "ga", "ga-random-model"],
                        seeds=[0, 1], budget=8, trial_points=(4, 8), time_points=(2.0,))
    rng = np.random.default_rng(0)
    for env_id in board.env_ids:
        for agent, scale in (("random", 50.0), ("ga", 80.0), ("ga-random-model", 60.0)):
            board.results[(env_id, agent)] = [_run(agent, list(scale * rng.random(8)), s) for s in (0, 1)]
        board.vendor[env_id] = [{"library": "numpy", "layout": "row-major", "gflops": 60.0}]
    board.errors.append({"env": "E1", "agent": "ga", "seed": 2, "error": "RuntimeError: <b>not html</b>\nmore"})
    plots = plot_curves(board, out)
    return board, plots, write_html(board, out, plots)


class _Cells(HTMLParser):
    """Rows of each table by id, and the images, from an HTML document."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[dict[str, str]] = []
        self._table = self._row = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id", ""), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag == "img":
            self.images.append(attrs)

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._row is not None and data.strip():
            self._row.append(data.strip())


def _parse(text: str) -> _Cells:
    parser = _Cells()
    parser.feed(text)
    return parser


def test_the_page_is_self_contained_and_holds_the_table_and_plots(page):
    board, plots, path = page
    text = path.read_text()
    cells = _parse(text)
    assert len(cells.tables["leaderboard"]) == 1 + len(board.rows())  # header + one row per agent / vendor
    assert cells.tables["leaderboard"][0][:3] == ["env", "agent", "n"] and "score" in cells.tables["leaderboard"][0]
    assert len(cells.tables["references"]) == 1 + len(board.env_ids)
    assert [img["src"][:22] for img in cells.images] == ["data:image/png;base64,"] * len(plots)
    assert not re.search(r'(src|href)="(?!data:)', text) and "<script" not in text  # nothing to fetch or run
    assert "&lt;b&gt;not html&lt;/b&gt;" in text and "<b>not" not in text  # text is escaped
    assert html_page(board) .count("<img") == 0  # without plots: the tables alone


def _chromium(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="tensorgym-chromium-")
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its zygote and renderer processes
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
def test_a_headless_browser_renders_the_table_and_every_plot(page, tmp_path):
    from PIL import Image

    board, plots, path = page
    dom = _chromium(["--dump-dom", path.as_uri()])
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = _parse(dom.stdout)
    assert rendered.tables["leaderboard"][1:] == _parse(path.read_text()).tables["leaderboard"][1:]
    assert len(rendered.tables["leaderboard"]) == 1 + len(board.rows())

    shot = tmp_path / "page.png"
    done = _chromium([f"--screenshot={shot}", "--window-size=1500,2800", path.as_uri()])
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    screen = np.asarray(Image.open(shot).convert("RGB"))

    def line_pixels(image: np.ndarray) -> int:
        return int(np.all(image == np.array(LINE_RGB, dtype=np.uint8), axis=-1).sum())

    expected = [line_pixels(np.asarray(Image.open(io.BytesIO(Path(p).read_bytes())).convert("RGB"))) for p in plots]
    assert all(n > 100 for n in expected)
    assert line_pixels(screen) == sum(expected)  # every plot is on the screen, whole and pixel for pixel
    header = np.all(screen == np.array((0xEE, 0xF0, 0xF3), dtype=np.uint8), axis=-1).sum()
    assert header > 1000  # the tables' header cells were painted


def test_the_headline_table_of_scores_comes_first(page):
    board, _, path = page
    text = path.read_text()
    headline = _parse(text).tables["headline"]
    assert headline[0] == ["agent", *board.env_ids]  # agents x envs: one compact table
    assert [row[0] for row in headline[1:]] == board.agents
    assert text.index('id="headline"') < text.index('id="leaderboard"')
    mean = float(headline[2][1])  # ga on E1: the mean of its seeds' scores, which is the detail's score column
    assert mean == pytest.approx(board.methodology_stats("E1", "ga")["score"].mean, abs=0.006)


def test_below_the_headline_each_model_is_set_against_its_ablation_seed_by_seed(page):
    board, _, path = page
    text = path.read_text()
    table = _parse(text).tables["ablations"]
    assert table[0] == ["difference", *board.env_ids] and [row[0] for row in table[1:]] == ["ga - ga-random-model"]
    assert text.index('id="headline"') < text.index('id="ablations"') < text.index('id="leaderboard"')
    diffs = np.subtract(board.seed_scores("E1", "ga"), board.seed_scores("E1", "ga-random-model"))  # seeds 0, 1
    mean, rest = table[1][1], table[1][2]  # the cell: its mean, then the interval and counts (which may wrap)
    assert float(mean) == pytest.approx(diffs.mean(), abs=0.006)
    assert f" {int((diffs > 0).sum())}/2 p " in rest  # seeds won / paired


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
@pytest.mark.parametrize("table", ["headline", "ablations"])
def test_the_top_tables_fit_a_1400_pixel_window_in_a_headless_browser(page, tmp_path, table):
    _, _, path = page
    probe = tmp_path / "probe.html"  # the page, plus a script that writes the table's laid-out width into it
    probe.write_text(path.read_text().replace("</body>", f"<script>var t = document.getElementById('{table}'); "
                                              "document.body.setAttribute('data-width', t.getBoundingClientRect()"
                                              ".right + ',' + window.innerWidth);</script></body>"))
    dom = _chromium(["--window-size=1400,900", "--dump-dom", probe.as_uri()])
    assert dom.returncode == 0, dom.stderr[-2000:]
    right, window = (float(v) for v in re.search(r'data-width="([\d.]+),([\d.]+)"', dom.stdout).groups())
    assert window == 1400 and right <= window  # no column off-screen
