"""Request logs for trace replay: arrival seconds and the log's own lengths, as a ReplayLog.

Reads the canonical request table through the profiler's readers when they are installed
(`profiles.readers.read_requests`), a Parquet file with the canonical columns, or the Azure
LLM inference trace CSV layout (`TIMESTAMP,ContextTokens,GeneratedTokens`) directly.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import polars as pl

from locustfiles.driver import ReplayLog
from planner.errors import InputError

CANONICAL = ("arrival_s", "input_tokens", "output_tokens")


def _azure_csv(path: Path) -> pl.DataFrame:
    df = pl.read_csv(path, columns=["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    ts = df["TIMESTAMP"].str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us")
    seconds = (ts - ts.min()).dt.total_microseconds() / 1e6
    return pl.DataFrame(
        {
            "arrival_s": seconds,
            "input_tokens": df["ContextTokens"].cast(pl.Int64),
            "output_tokens": df["GeneratedTokens"].cast(pl.Int64),
        }
    ).sort("arrival_s", maintain_order=True)


def read_log_table(path: str | Path) -> pl.DataFrame:
    """The log as (arrival_s, input_tokens, output_tokens), sorted by arrival.

    Raises InputError naming the file when it cannot be read in any known layout.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: replay log not found")
    if p.suffix == ".parquet":
        df = pl.read_parquet(p)
        missing = [c for c in CANONICAL if c not in df.columns]
        if missing:
            raise InputError(
                f"{p}: replay table lacks columns {missing} (expected {list(CANONICAL)})"
            )
        return df.select(CANONICAL).sort("arrival_s", maintain_order=True)
    try:
        readers = importlib.import_module("profiles.readers")
    except ImportError:
        readers = None
    if readers is not None and hasattr(readers, "read_requests"):
        table = readers.read_requests(p)
        frame = getattr(table, "requests", table)
        if isinstance(frame, pl.LazyFrame):
            frame = frame.collect()
        if isinstance(frame, pl.DataFrame) and all(c in frame.columns for c in CANONICAL):
            return frame.select(CANONICAL).sort("arrival_s", maintain_order=True)
    try:
        return _azure_csv(p)
    except (pl.exceptions.PolarsError, ValueError) as err:
        raise InputError(
            f"{p}: cannot read as a request log (expected a format capplan profile reads, "
            f"or TIMESTAMP,ContextTokens,GeneratedTokens): {err}"
        ) from err


def slice_log(table: pl.DataFrame, start_s: float, span_s: float) -> pl.DataFrame:
    """Rows with start_s <= arrival_s < start_s + span_s (log seconds)."""
    return table.filter((pl.col("arrival_s") >= start_s) & (pl.col("arrival_s") < start_s + span_s))


def to_replay(table: pl.DataFrame, speed: float) -> ReplayLog:
    return ReplayLog(
        arrival_s=table["arrival_s"].to_numpy().astype(float),
        input_tokens=np.maximum(table["input_tokens"].fill_null(1).to_numpy(), 1),
        output_tokens=np.maximum(table["output_tokens"].fill_null(1).to_numpy(), 1),
        speed=speed,
    )
