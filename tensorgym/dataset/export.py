"""A database as a table: one row per record, for pandas (a TenSet-style dataset).

Columns of :func:`dataset_frame`:

==================  ===========================================================
``record_id``       the record's id in the database
``workload``        the workload key, e.g. ``conv2d(N=1,C=64,...,dtype=float32)``
``label``           its display name (``ResNet-50/R5``, ``prior/C64-H56-F64-R3-s1``)
``op``, ``dtype``   operator and data type
``shape``           the shape parameters as JSON text
``conv2d.C`` ...    the same, one column per operator parameter (``conv2d.N``
                    is the batch, ``matmul.N`` the columns: hence the prefix)
``gflop``           the workload's GFLOP count
``space``           the search space (``tiles``)
``config``          the config as JSON text
``af_<name>``       the analytical features of the config (raw values,
                    :mod:`tensorgym.spaces.tiles.features`)
``generic``         the generic schedule features (a list; JSON text in CSV;
                    their names depend on the layer's loops)
``status``          ``ok``, ``build_error``, ``runtime_error``, ``timeout``, ``wrong_result``
``latency_s`` ...   the record's timing and cost: ``latency_s``, ``latency_cv``,
                    ``gflops``, ``build_s``, ``run_s``, ``wall_s``
``target``          the target fingerprint; ``target_label`` its CPU
``created``         when it was measured (Unix time)
==================  ===========================================================

Feature columns are filled for the ``tiles`` space (records of other spaces
keep them empty). pandas (and pyarrow, for Parquet) come with the ``data``
extra: ``pip install 'tensorgym[data]'``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..database import Database
from ..errors import InvalidArgumentError, TensorgymError
from ..spaces.tiles import TilesSpace
from ..spaces.tiles.features import FEATURE_NAMES

FORMATS = ("parquet", "csv")


class MissingExtra(TensorgymError, ImportError):
    """An optional dependency is not installed."""


def _pandas():
    try:
        import pandas
    except ImportError:
        raise MissingExtra("exporting a dataset needs pandas: pip install 'tensorgym[data]'") from None
    return pandas


def dataset_rows(database: Database, *, space: str | None = "tiles", target: str | None = None,
                 features: bool = True) -> list[dict[str, Any]]:
    """One dict per record of ``space`` (None: every space) and ``target`` fingerprint (None: every target)."""
    workloads = database.workloads()
    targets = database.targets()
    spaces: dict[tuple[str, str], TilesSpace | None] = {}
    rows = []
    for record in database.records(target=target, space=space):
        wl = workloads.get(record.workload)
        row: dict[str, Any] = {"record_id": record.id, "workload": record.workload,
                               "label": wl.label if wl else record.workload}
        if wl is not None:
            row.update({"op": wl.op, "dtype": wl.dtype, "shape": json.dumps(wl.shape_params), "gflop": wl.gflop})
            row.update({f"{wl.op}.{k}": v for k, v in wl.shape_params.items() if k != "dtype"})
        row.update({"space": record.space, "config": record.config.key})
        tiles = None
        if features and record.space == "tiles" and wl is not None and record.target in targets:
            key = (record.workload, record.target)
            if key not in spaces:
                spaces[key] = TilesSpace(wl, targets[record.target])
            tiles = spaces[key]
        if tiles is not None:
            row.update({f"af_{name}": float(v) for name, v in zip(FEATURE_NAMES, tiles.features(record.config))})
            row["generic"] = [float(v) for v in tiles.generic_features(record.config)]
        row.update({"status": record.status.value, "latency_s": record.latency_s, "latency_cv": record.latency_cv,
                    "gflops": record.gflops, "build_s": record.build_s, "run_s": record.run_s,
                    "wall_s": record.wall_s, "target": record.target,
                    "target_label": targets[record.target].label if record.target in targets else "",
                    "created": record.created})
        rows.append(row)
    return rows


def dataset_frame(database: Database, *, space: str | None = "tiles", target: str | None = None,
                  features: bool = True):
    """The records as a ``pandas.DataFrame`` (columns: see the module docs)."""
    pd = _pandas()
    rows = dataset_rows(database, space=space, target=target, features=features)
    if not rows:
        where = f" of space {space!r}" if space else ""
        raise InvalidArgumentError(f"{database.path} holds no record{where} to export")
    return pd.DataFrame(rows)


def export_dataset(database: Database, path: str | Path, fmt: str | None = None, *, space: str | None = "tiles",
                   target: str | None = None) -> int:
    """Write the records to ``path`` as Parquet or CSV (``fmt``, default: from the suffix); returns the rows."""
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"format must be one of {FORMATS} (or a path ending in .parquet / .csv), "
                                   f"got {fmt!r}")
    frame = dataset_frame(database, space=space, target=target)
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise MissingExtra("Parquet export needs pyarrow: pip install 'tensorgym[data]' (or use --format csv)") \
                from None
        frame.to_parquet(path, index=False)
    else:
        if "generic" in frame:
            frame = frame.assign(generic=frame["generic"].map(lambda v: json.dumps(v) if isinstance(v, list) else v))
        frame.to_csv(path, index=False)
    return len(frame)
