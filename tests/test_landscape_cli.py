"""``tensorgym landscape measure|export|check`` end to end on a tiny benchmark space of a real layer."""

from __future__ import annotations

import json

import pytest

from tensorgym.cli import main
from tensorgym.database import Database
from tensorgym.landscape import Landscape
from tensorgym.record import Status

LAYER = "Conv2d-ResNet18-C7-v0"  # a 1x1 conv: its kernels build and run in a fraction of a second


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A 4-config benchmark space of C7 anchored by a 4-measurement GA search, measured in two chunks."""
    tmp = tmp_path_factory.mktemp("landscape")
    db = tmp / "land.db"
    common = [LAYER, "--db", str(db), "--max-configs", "4", "--anchor-budget", "4", "-q"]
    assert main(["landscape", "measure", *common, "--limit", "2"]) == 0  # a first chunk
    assert (tmp / "land-anchor.db").exists()  # the anchoring search went into its own database
    assert main(["landscape", "measure", *common]) == 0  # resumed: the rest
    return tmp, db, common


def test_measure_resumes_and_measures_every_config_once(measured, capsys):
    tmp, db, common = measured
    assert main(["landscape", "measure", *common]) == 0
    assert "0 measured now" in capsys.readouterr().out  # nothing left
    with Database(db, readonly=True) as database:
        records = database.records()
    assert len(records) == len({r.config for r in records}) >= 4
    assert all(r.status is Status.OK for r in records)


def test_export_writes_the_landscape_and_t4(measured, capsys):
    tmp, db, common = measured
    out, t4 = tmp / "C7.json.gz", tmp / "C7_T4.json"
    args = [a for a in common if a != "-q"]
    assert main(["landscape", "export", *args, "--out", str(out), "--t4", str(t4)]) == 0
    landscape = Landscape.load(out)
    assert landscape.complete and len(landscape) == len(landscape.space().configs())
    assert landscape.optimum is not None and landscape.metadata.env_id == LAYER
    assert json.loads(t4.read_text())["results"]
    assert "optimum" in capsys.readouterr().out


def test_check_remeasures_live_and_reports_the_rank_agreement(measured, capsys):
    tmp, db, common = measured
    out = tmp / "C7-check.json.gz"
    assert main(["landscape", "export", *[a for a in common if a != "-q"], "--out", str(out)]) == 0
    assert main(["landscape", "check", LAYER, "--landscape", str(out), "--configs", "3", "-q"]) == 0
    text = capsys.readouterr().out
    assert "re-measured live on the landscape's own CPU" in text and "Spearman" in text


def test_export_of_an_unmeasured_layer_is_one_line(tmp_path, capsys):
    code = main(["landscape", "export", LAYER, "--db", str(tmp_path / "none.db"), "--anchor-budget", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "landscape measure" in err
