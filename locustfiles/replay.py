"""Request logs for trace replay: arrival seconds and the log's own lengths, as a ReplayLog.

Reads any log `capplan profile` reads through the profiler's readers
(`profiles.readers.read_requests`), or a Parquet file with the canonical columns (what
`capplan loadtest` hands to Locust).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from contracts.errors import InputError
from locustfiles.driver import ReplayLog
from profiles.readers import read_requests

CANONICAL = ("arrival_s", "input_tokens", "output_tokens")


def read_log_table(path: str | Path) -> pl.DataFrame:
    """The log as (arrival_s, input_tokens, output_tokens), sorted by arrival.

    Raises InputError naming the file when it is missing or in no format the readers know.
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
    # Every logged arrival is replayed, failed ones included: they were load too.
    frame = read_requests([str(p)]).frame
    return frame.select(CANONICAL).sort("arrival_s", maintain_order=True)


def slice_log(table: pl.DataFrame, start_s: float, span_s: float) -> pl.DataFrame:
    """Rows with start_s <= arrival_s < start_s + span_s (log seconds)."""
    return table.filter((pl.col("arrival_s") >= start_s) & (pl.col("arrival_s") < start_s + span_s))


def to_replay(table: pl.DataFrame, speed: float, origin_s: float = 0.0) -> ReplayLog:
    """The table as a ReplayLog whose stage starts at log second `origin_s`."""
    return ReplayLog(
        arrival_s=table["arrival_s"].to_numpy().astype(float),
        input_tokens=np.maximum(table["input_tokens"].fill_null(1).to_numpy(), 1),
        output_tokens=np.maximum(table["output_tokens"].fill_null(1).to_numpy(), 1),
        speed=speed,
        origin_s=origin_s,
    )
