"""How sure an instance count is: the planning peak's block bootstrap and the limit's range.

Pure functions; the random generator is passed in. The count of every replicate comes from
`planner.capacity.arithmetic.instances_for_load`, the plan's own rule.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from contracts.finding import Finding
from contracts.limit import LimitResult
from contracts.review import CountInterval
from planner.capacity.arithmetic import instances_for_load
from profiles.model import Profile

REPLICATES = 1000

METHOD = Finding(key="review.count_method")
# A predicted limit (the engine model's, on the emulator or whatif): the range is where
# published server results put a GPU's limit around the model's figure.
METHOD_PREDICTED = Finding(key="review.count_method_predicted")


def window_rates(profile: Profile, window_s: float) -> np.ndarray | None:
    """The profile's rate series summed into full windows of `window_s`, or None when its bins
    are coarser than the window or do not divide it (long logs keep coarse series)."""
    series = profile.arrivals.rate_series
    bin_s = series.bin_s
    if bin_s > window_s or window_s % bin_s:
        return None
    k = int(round(window_s / bin_s))
    rates = np.asarray(series.rates_rps[:-1])  # the last bin is partial
    full = len(rates) // k
    if full < 2:
        return None
    return rates[: full * k].reshape(full, k).mean(axis=1)


def block_bootstrap_quantile(
    values: np.ndarray, quantile: float, rng: np.random.Generator, replicates: int = REPLICATES
) -> tuple[np.ndarray, int]:
    """Moving-block bootstrap replicates of the `quantile` of `values`, and the block length.

    Blocks of about sqrt(n) consecutive windows keep the series' short-range correlation
    (a burst spans several windows); each replicate joins random blocks to n values.
    """
    n = len(values)
    block = max(1, int(round(math.sqrt(n))))
    starts_max = n - block + 1
    per = math.ceil(n / block)
    starts = rng.integers(0, starts_max, size=(replicates, per))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(replicates, -1)[:, :n]
    return np.quantile(values[idx], quantile, axis=1), block


def limit_range(result: LimitResult) -> tuple[float, float] | None:
    """Where the true limit lies: from the highest load that passed with its bootstrap
    interval clear of every threshold (`certain`) to the lowest load that failed (or the
    search's tolerance above the feasible maximum when nothing failed)."""
    if result.feasible_max is None:
        return None
    certain = [lv.load for lv in result.levels if lv.verdict == "pass" and lv.certain]
    low = max([x for x in certain if x <= result.feasible_max], default=result.feasible_max)
    high = result.infeasible_min or result.feasible_max * (1 + result.tolerance)
    return (min(low, result.feasible_max), max(high, result.feasible_max))


def limit_span(result: LimitResult) -> tuple[float, float] | None:
    """The range the limit is drawn from: the search's (`limit_range`), widened to the
    prediction's interval when the limit is predicted, not measured (`result.predicted`:
    where a real GPU's limit is expected around the engine model's)."""
    span = limit_range(result)
    if span is None or result.predicted is None:
        return span
    return (min(span[0], result.predicted.low), max(span[1], result.predicted.high))


def count_interval(
    *,
    instances: int,
    peak_replicates: np.ndarray | None,
    peak_rps: float,
    limit: float,
    limit_span: tuple[float, float] | None,
    per_rps: float,
    growth: float,
    headroom: float,
    redundancy: int,
    level: float,
    rng: np.random.Generator,
    block_windows: int = 0,
    predicted: bool = False,
) -> CountInterval:
    """The `level` interval of the instance count over peak replicates x limit draws.

    The limit is drawn uniformly (in log) from `limit_span` (the search brackets it; nothing
    inside the bracket is more likely); a peak without replicates and a limit without a span
    stay fixed. `per_rps` converts a peak in req/s to the limit's unit. `predicted`: the
    span is a predicted limit's (`limit_span`), and the method says so.
    """
    size = len(peak_replicates) if peak_replicates is not None else REPLICATES
    peaks = peak_replicates if peak_replicates is not None else np.full(size, peak_rps)
    if limit_span is not None and limit_span[1] > limit_span[0]:
        lo, hi = math.log(limit_span[0]), math.log(limit_span[1])
        limits = np.exp(rng.uniform(lo, hi, size=size))
    else:
        limits = np.full(size, limit)
    counts = np.array(
        [
            instances_for_load(p * per_rps * growth, lim, headroom) + redundancy
            for p, lim in zip(peaks, limits, strict=True)
        ]
    )
    tail = (1 - level) / 2
    low = int(np.quantile(counts, tail, method="lower"))
    high = int(np.quantile(counts, 1 - tail, method="higher"))
    peak_iv = None
    peak_spread = 0.0
    if peak_replicates is not None:
        a, b = np.quantile(peak_replicates, [tail, 1 - tail])
        peak_iv = (float(a), float(b))
        peak_spread = math.log(b / a) if a > 0 else math.inf
    limit_spread = math.log(limit_span[1] / limit_span[0]) if limit_span is not None else 0.0
    # The limit range is uniform: its central `level` share spans `level` of the log-range.
    limit_spread *= level
    dominant: Literal["peak", "limit", "none"] = (
        "none"
        if peak_spread == 0 and limit_spread == 0
        else ("peak" if peak_spread >= limit_spread else "limit")
    )
    return CountInterval(
        level=level,
        instances=instances,
        low=min(low, instances),
        high=max(high, instances),
        peak_rps_interval=peak_iv,
        limit_interval=limit_span,
        peak_spread=peak_spread,
        limit_spread=limit_spread,
        dominant=dominant,
        replicates=size,
        block_windows=block_windows,
        method=(METHOD_PREDICTED if predicted else METHOD).english(),
        method_finding=METHOD_PREDICTED if predicted else METHOD,
    )
