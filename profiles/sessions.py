"""Session statistics: turns per session, time between turns, context growth per turn."""

from __future__ import annotations

import numpy as np
import polars as pl

from profiles.model import Quantiles, Sessions


def quantiles(values: np.ndarray) -> Quantiles | None:
    if values.size == 0:
        return None
    q = np.percentile(values, [50, 90, 99, 100])
    return Quantiles(
        mean=float(values.mean()),
        p50=float(q[0]),
        p90=float(q[1]),
        p99=float(q[2]),
        max=float(q[3]),
    )


def session_stats(frame: pl.DataFrame) -> Sessions:
    """Sessions of a canonical frame sorted by arrival (rows without a session id are left out).

    Think time is the gap between consecutive turns' arrivals (the log has no completion
    times); context growth is the change in input tokens from one turn to the next.
    """
    if "session_id" not in frame.columns:
        return Sessions(available=False)
    s = frame.select("session_id", "arrival_s", "input_tokens").filter(
        pl.col("session_id").is_not_null()
    )
    if s.height == 0:
        return Sessions(available=False)
    turns = s.group_by("session_id").len()["len"].to_numpy()
    steps = s.select(
        pl.col("arrival_s").diff().over("session_id").alias("gap"),
        pl.col("input_tokens").diff().over("session_id").alias("growth"),
    ).drop_nulls()
    multi = float(turns[turns >= 2].sum() / frame.height)
    return Sessions(
        available=True,
        count=int(turns.size),
        turns=quantiles(turns.astype(np.float64)),
        think_time_s=quantiles(steps["gap"].to_numpy()),
        context_growth_tokens=quantiles(steps["growth"].to_numpy().astype(np.float64)),
        multi_turn_request_share=multi,
    )
