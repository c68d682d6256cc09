"""Per-request rows and scraped server samples on disk: Arrow part files, read back at any time.

The process that writes (the local runner or the master) appends a part file about every
second (`records.parts/part-NNNNNN.msgpack`), written to a temporary name and renamed, so a
crash or Ctrl-C loses at most the last second and a reader never sees half a file. At the
end of a run the parts are consolidated into `records.parquet` (and `server_metrics.parquet`)
by `consolidate`. `read_table` reads the consolidated file plus any parts not yet merged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack
import polars as pl

from contracts.run import RECORD_COLUMNS, SERVER_METRIC_COLUMNS

RECORD_NAMES: tuple[str, ...] = tuple(RECORD_COLUMNS)
METRIC_NAMES: tuple[str, ...] = tuple(SERVER_METRIC_COLUMNS)

RECORDS_FILE = "records.parquet"
RECORDS_PARTS = "records.parts"
METRICS_FILE = "server_metrics.parquet"
METRICS_PARTS = "server_metrics.parts"


def _frame(rows: Sequence[Sequence[Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame([list(r) for r in rows], schema=schema, orient="row")


class PartWriter:
    """Appends rows (tuples in column order) as numbered msgpack part files in `folder`.

    msgpack because a part is written inside the load generator's event loop: packing a
    second's rows takes tens of microseconds, where building an Arrow frame takes
    milliseconds and would delay scheduled sends. Parts become Parquet at consolidation.
    """

    def __init__(self, folder: Path, schema: dict[str, Any]) -> None:
        self._folder = folder
        self._schema = schema
        folder.mkdir(parents=True, exist_ok=True)
        existing = [int(p.name.split("-")[1].split(".")[0]) for p in folder.glob("part-*.msgpack")]
        self._seq = max(existing, default=0)

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        self._seq += 1
        final = self._folder / f"part-{self._seq:06d}.msgpack"
        tmp = final.with_suffix(".tmp")
        tmp.write_bytes(msgpack.packb([list(r) for r in rows], use_bin_type=True))
        os.replace(tmp, final)


def _read_part(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    rows = msgpack.unpackb(path.read_bytes(), raw=False)
    return _frame(rows, schema)


def _empty(schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def read_table(
    run_dir: Path, file_name: str, parts_name: str, schema: dict[str, Any]
) -> pl.DataFrame:
    """The consolidated file (if any) plus every complete part file, in write order."""
    frames: list[pl.DataFrame] = []
    path = run_dir / file_name
    if path.exists():
        frames.append(pl.read_parquet(path))
    parts = sorted((run_dir / parts_name).glob("part-*.msgpack"))
    frames.extend(_read_part(p, schema) for p in parts)
    if not frames:
        return _empty(schema)
    return pl.concat([_conform(f, schema) for f in frames], how="vertical")


def _conform(frame: pl.DataFrame, schema: dict[str, Any]) -> pl.DataFrame:
    """`frame` in `schema`'s column order and types; a column that a file written by an older
    capplan lacks (e.g. `error_message`) reads as null, so such a run can still be appended to."""
    missing = [
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
        if name not in frame.columns
    ]
    return frame.with_columns(missing).select(list(schema)).cast(pl.Schema(schema))


def consolidate(run_dir: Path, file_name: str, parts_name: str, schema: dict[str, Any]) -> int:
    """Merge the parts into `file_name` (kept rows first), delete the parts; returns rows."""
    table = read_table(run_dir, file_name, parts_name, schema)
    tmp = run_dir / (file_name + ".tmp")
    table.write_parquet(tmp)
    os.replace(tmp, run_dir / file_name)
    parts_dir = run_dir / parts_name
    if parts_dir.exists():
        for p in parts_dir.glob("part-*"):
            p.unlink()
        parts_dir.rmdir()
    return table.height


def read_records_table(run_dir: Path) -> pl.DataFrame:
    return read_table(run_dir, RECORDS_FILE, RECORDS_PARTS, RECORD_COLUMNS)


def read_metrics_table(run_dir: Path) -> pl.DataFrame:
    return read_table(run_dir, METRICS_FILE, METRICS_PARTS, SERVER_METRIC_COLUMNS)
