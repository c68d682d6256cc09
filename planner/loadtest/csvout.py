"""CSV beside a run's Parquet and JSON, as Locust's and guidellm's `--csv` write it.

`write_run_csv(run_dir, prefix)` writes PREFIX_records.csv (records.parquet, one row per
scheduled request; a request's chunk gaps as one `;`-separated cell) and PREFIX_stages.csv
(stages.json, one row per stage; nested fields flattened to `ttft_s.p95`-style columns, lists
of records by index, other lists as JSON); `write_limit_csv` adds PREFIX_levels.csv, one row
per level of limit.json. `flat_rows` is the flattening, for any JSON table written as CSV.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from contracts.errors import InputError
from contracts.limit import load_limit
from contracts.rundir import holds_run, read_records, read_stages

__all__ = ["csv_paths", "flat_rows", "write_csv_rows", "write_limit_csv", "write_run_csv"]


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list | tuple) and value and all(isinstance(v, Mapping) for v in value):
        for i, item in enumerate(value):  # e.g. a level's constraints: constraints.0.value
            _flatten(item, f"{prefix}.{i}", out)
    elif isinstance(value, list | tuple):
        out[prefix] = json.dumps(value)
    else:
        out[prefix] = value


def flat_rows(items: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns (in first-seen order) and the rows of `items` flattened with dotted keys."""
    rows = []
    for item in items:
        flat: dict[str, Any] = {}
        _flatten(item, "", flat)
        rows.append(flat)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return columns, rows


def write_csv_rows(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Write `rows` under `columns` (a missing cell stays empty); raises InputError when the
    file cannot be written."""
    try:
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns, restval="")
            writer.writeheader()
            writer.writerows(rows)
    except OSError as err:
        raise InputError(f"--csv {path}: cannot write ({err.strerror or err})") from err


def csv_paths(prefix: str, *names: str) -> list[Path]:
    """PREFIX_<name>.csv for each name (Locust's naming)."""
    return [Path(f"{prefix}_{name}.csv") for name in names]


def write_run_csv(run_dir: Path, prefix: str) -> list[Path]:
    """Write PREFIX_records.csv and PREFIX_stages.csv from the run in `run_dir`; returns the
    paths written."""
    records_path, stages_path = csv_paths(prefix, "records", "stages")
    records_path.parent.mkdir(parents=True, exist_ok=True)
    records = read_records(run_dir).with_columns(
        pl.col("itl_gaps_s")
        .list.eval(pl.element().cast(pl.Utf8))
        .list.join(";")
        .alias("itl_gaps_s")
    )
    try:
        records.write_csv(records_path)
    except OSError as err:
        raise InputError(f"--csv {records_path}: cannot write ({err.strerror or err})") from err
    columns, rows = flat_rows(s.model_dump(mode="json") for s in read_stages(run_dir))
    write_csv_rows(stages_path, columns, rows)
    return [records_path, stages_path]


def write_limit_csv(run_dir: Path, prefix: str) -> list[Path]:
    """Write PREFIX_levels.csv from `run_dir`/limit.json (one row per level held) and, where
    the search measured a run there (not a fast search's prediction), its records and stages
    CSV; returns the paths written. Raises InputError when limit.json is missing or bad."""
    (levels_path,) = csv_paths(prefix, "levels")
    levels_path.parent.mkdir(parents=True, exist_ok=True)
    limit = load_limit(run_dir)
    columns, rows = flat_rows(level.model_dump(mode="json") for level in limit.levels)
    write_csv_rows(levels_path, columns, rows)
    return [levels_path, *(write_run_csv(run_dir, prefix) if holds_run(run_dir) else [])]
