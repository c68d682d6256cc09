"""Session statistics: turns per session, time between turns, context growth per turn."""

from __future__ import annotations

import numpy as np
import polars as pl

from profiles.model import Quantiles, Sessions

# Above this many requests with a session id, statistics come from a hash sample of sessions
# (whole sessions, so turns and gaps stay intact), which keeps the sort small.
SAMPLE_ABOVE_ROWS = 500_000


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
    times); context growth is the change in input tokens from one turn to the next. Sessions
    are keyed by a 64-bit hash of their id; above SAMPLE_ABOVE_ROWS requests, the sessions
    whose hash has its low k bits zero (1 in 2^k, chosen to keep about SAMPLE_ABOVE_ROWS
    requests) are measured and `sample_share` says so (`count` is then scaled up).
    """
    if "session_id" not in frame.columns:
        return Sessions(available=False)
    n_valid = frame.height - frame["session_id"].null_count()
    if n_valid == 0:
        return Sessions(available=False)
    k = sample_bits(n_valid)
    keyed = (
        frame.lazy()
        .filter(pl.col("session_id").is_not_null())
        .select(pl.col("session_id").hash().alias("h"), "arrival_s", "input_tokens")
    )
    if k:
        keyed = keyed.filter((pl.col("h") & ((1 << k) - 1)) == 0)
    sample = keyed.collect()
    return sessions_of_sample(
        sample["h"].to_numpy(),
        sample["arrival_s"].to_numpy(),
        sample["input_tokens"].to_numpy(),
        k,
        n_valid,
        frame.height,
    )


def sample_bits(n_valid: int) -> int:
    """k such that 1 in 2^k sessions keeps about SAMPLE_ABOVE_ROWS of `n_valid` requests."""
    k = 0
    while n_valid / (1 << k) > SAMPLE_ABOVE_ROWS:
        k += 1
    return k


def sessions_of_sample(
    hs: np.ndarray, ts: np.ndarray, ins: np.ndarray, k: int, n_valid: int, n_rows: int
) -> Sessions:
    """Sessions from the requests (in arrival order) of the sessions whose id hash `hs` has its
    low k bits zero: arrival `ts` and input tokens `ins`; `n_valid` requests had a session id
    out of `n_rows`."""
    order = _grouped_order(hs)
    hs, ts, ins = hs[order], ts[order], ins[order]
    same = hs[1:] == hs[:-1]
    gaps = np.diff(ts)[same]
    growth = np.diff(ins)[same].astype(np.float64)
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    turns = np.diff(np.append(starts, hs.size))
    share = 1.0 / (1 << k)
    multi_rows = float(turns[turns >= 2].sum())
    return Sessions(
        available=True,
        count=int(round(turns.size / share)),
        turns=quantiles(turns.astype(np.float64)),
        think_time_s=quantiles(gaps),
        context_growth_tokens=quantiles(growth),
        multi_turn_request_share=multi_rows / max(hs.size, 1) * n_valid / n_rows,
        sample_share=share,
    )


def _grouped_order(hs: np.ndarray) -> np.ndarray:
    """`np.argsort(hs, kind="stable")` (each session's turns stay in arrival order), in about
    half its time: numpy's unstable sort of 64-bit keys is vectorised, its stable one is not.
    Sorts by hash, then within each run of equal hashes by position, as one int64 key."""
    if hs.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(hs)
    ranked = hs[order]
    run = np.zeros(hs.size, dtype=np.int64)
    np.cumsum(ranked[1:] != ranked[:-1], out=run[1:])
    key = run * hs.size + order  # below n^2: exact in int64 for any sample that fits in memory
    key.sort()
    return key % hs.size
