"""Burst recovery, defined once: the rolling p95 TTFT after a burst and when it is back under
the threshold.

Pure. The rolling p95 at time t is taken over the requests scheduled in (t - 10 s, t] of any
stage; a request's TTFT is measured from its intended send (a slow client cannot hide
queueing), a failed request counts as +infinity and one still running when the run ended
at its age (contracts.latency.request_values). The recovery time is the first t at or after the
burst's end where that p95 is at or under the threshold. stages.json stores the curve and
the time (StageSummary.recovery_curve, recovery_s), the live load test ends a recovery stage
with it, and the report draws the stored curve, so all three agree.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from contracts.latency import quantile, request_values
from contracts.run import RecoveryCurve

RECOVERY_WINDOW_S = 10.0
RECOVERY_STEP_S = 0.5
MIN_WINDOW_SAMPLES = 3
LEAD_S = 20.0  # the curve starts this long before the burst, to show the steady level


def _ttft_from_intended(records: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(intended send, TTFT from the intended send) per request, in send order."""
    frame = records.sort("intended_send_s")
    ttft = request_values(frame, "ttft")
    lag = frame["schedule_lag_s"].cast(pl.Float64).fill_null(0.0).to_numpy()
    sent = frame["intended_send_s"].cast(pl.Float64).to_numpy()
    return sent, ttft + lag


def rolling_p95(
    records: pl.DataFrame, start_s: float, end_s: float, step_s: float = RECOVERY_STEP_S
) -> tuple[np.ndarray, np.ndarray]:
    """(t, p95 TTFT over requests scheduled in (t - 10 s, t]) from `start_s` to `end_s`;
    NaN where the window holds fewer than 3 requests."""
    sent, ttft = _ttft_from_intended(records)
    grid = np.arange(start_s, end_s + 1e-9, step_s)
    p95 = np.full(grid.size, np.nan)
    lo = np.searchsorted(sent, grid - RECOVERY_WINDOW_S, side="right")
    hi = np.searchsorted(sent, grid, side="right")
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if b - a >= MIN_WINDOW_SAMPLES:
            p95[i] = float(quantile(ttft[a:b], 0.95))
    return grid, p95


def recovery_curve(
    records: pl.DataFrame,
    burst_start_s: float,
    burst_end_s: float,
    end_s: float,
    threshold_s: float,
) -> RecoveryCurve:
    """The rolling p95 from shortly before the burst to `end_s`, and the recovery time."""
    t, p95 = rolling_p95(records, max(0.0, burst_start_s - LEAD_S), end_s)
    after = (t >= burst_end_s - 1e-9) & (p95 <= threshold_s)
    recovered_at = float(t[after][0]) if after.any() else None
    return RecoveryCurve(
        t_s=[float(x) for x in t],
        ttft_p95_s=[None if np.isnan(y) else float(y) for y in p95],
        threshold_s=threshold_s,
        burst_start_s=burst_start_s,
        burst_end_s=burst_end_s,
        recovery_s=None if recovered_at is None else max(0.0, recovered_at - burst_end_s),
    )
