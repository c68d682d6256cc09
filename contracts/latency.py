"""Per-request latency values as the verdicts count them, shared by the SLO verdicts
(planner.slo), the recovery curve (contracts.recovery) and the stage statistics.

Pure, and contract-level: it imports nothing of the project. Every scheduled request has a
value: a successful one its measured latency, a failed one +infinity (it misses every
threshold), one still running when its window closed (error class `cancelled`) a lower
bound at its age.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow.compute as pc

# SLO metric name -> per-request column (seconds) in records.parquet / simulator results.
METRIC_COLUMNS: dict[str, str] = {
    "ttft": "ttft_s",
    "tpot": "tpot_s",
    "e2e": "e2e_s",
    "itl_max": "itl_max_s",
}
# Error classes that mean "still running when the window closed", not "failed".
CENSORED_CLASSES = frozenset({"cancelled"})
# Linear interpolation between a finite value and +inf yields nan in numpy: quantiles are
# taken with +inf replaced by a huge finite stand-in, mapped back to +inf afterwards.
_INF_STAND_IN = 1e300
_INF_FROM = 1e200


def float_values(series: pl.Series, null: float = math.nan, nan: float = math.nan) -> np.ndarray:
    """`series` as float64, a null read as `null` and a NaN as `nan`: what
    `.cast(pl.Float64).fill_nan(nan).fill_null(null).to_numpy()` gives, without the two
    fills' cost (about 0.3-0.4 ms each on a short series, thousands of times a search)."""
    s = series.cast(pl.Float64)
    values = np.array(s.to_numpy(), dtype=np.float64)  # a null reads NaN here
    nulls = np.asarray(pc.is_null(s.to_arrow()), dtype=bool) if s.null_count() else None
    if not math.isnan(nan):
        values[np.isnan(values)] = nan  # nulls too, until the next line
    if nulls is not None:
        values[nulls] = null
    return values


def bool_values(series: pl.Series) -> np.ndarray:
    """`series` as a bool array, a null read as False (`.fill_null(False).to_numpy()`)."""
    return np.asarray(pc.fill_null(series.to_arrow(), False), dtype=bool)


def _float_column(records: pl.DataFrame, name: str) -> np.ndarray:
    if name not in records.columns:
        return np.full(records.height, np.nan)
    return float_values(records[name])


def request_outcomes(records: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per request: (succeeded, censored). Censored = still running when the window closed
    (error class `cancelled`); every other request that did not succeed failed."""
    ok = bool_values(records["ok"])
    if "error_class" in records.columns:
        censored_arr = bool_values(records["error_class"].is_in(list(CENSORED_CLASSES))) & ~ok
    else:
        censored_arr = np.zeros(records.height, dtype=bool)
    return ok, censored_arr


def request_values(
    records: pl.DataFrame,
    metric: str,
    *,
    success_only: bool = False,
    outcomes: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """One value of `metric` (seconds) per request, in the records' order.

    A successful request has its measured value (NaN where it has none: TPOT of a one-token
    answer). A failed one is +inf: it misses every threshold. A censored one (still running
    when the window closed) has a lower bound: TTFT as measured when its first token came,
    else its age; E2E its age; TPOT and ITL the gaps of the tokens it got. With
    `success_only`, failed and censored requests are NaN (left out). `outcomes`: the
    records' `request_outcomes`, where the caller already has them.
    """
    col = METRIC_COLUMNS[metric]
    values = _float_column(records, col)
    ok, censored = request_outcomes(records) if outcomes is None else outcomes
    if success_only:
        return np.where(ok, values, np.nan)
    failed = ~ok & ~censored
    out = np.where(failed, np.inf, values)
    if censored.any():
        send = _float_column(records, "sent_s")
        send = np.where(np.isnan(send), _float_column(records, "intended_send_s"), send)
        age = _float_column(records, "end_s") - send
        if metric == "ttft":
            bound = np.where(np.isnan(values), age, values)
        elif metric == "e2e":
            bound = age
        elif metric == "tpot":
            bound = _float_column(records, "itl_mean_s")
        else:
            bound = values
        out = np.where(censored, bound, out)
    return out


def quantile(values: np.ndarray, q: float, axis: int | None = None) -> np.ndarray:
    """numpy's linear-interpolation quantile that treats +inf as a value (a failed request):
    a quantile that reaches into the failures is +inf."""
    safe = np.where(np.isposinf(values), _INF_STAND_IN, values)
    out = np.asarray(np.quantile(safe, q, axis=axis))
    return np.where(out >= _INF_FROM, np.inf, out)
