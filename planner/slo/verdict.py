"""SLO verdicts: judge one stage's per-request records against an SLO (parsed by
planner.slo.spec; its names are re-exported here, the one import path of the SLO).

Pure: no files, no clocks.

Definitions follow vLLM: a *good* request succeeded and meets every per-request threshold
(inclusive); *goodput* is good requests per second of the (post-warm-up) stage; *attainment*
is good / all scheduled requests (errors and timeouts count as not good).

Every scheduled request counts. A failed request (HTTP error, refusal, timeout, disconnect)
misses every latency threshold: it enters a percentile as +infinity. A request still in
flight when its window closed (recorded as `cancelled`) is censored: its latency is at
least its age, and that lower bound is its value (TTFT is exact when its first token came;
TPOT is the mean gap of the tokens it got). `Slo.success_only` keeps the vLLM-bench style
instead: percentiles over the successful requests alone. Percentiles use numpy's linear
interpolation; a successful request with one output token has no TPOT and meets any TPOT
threshold (vLLM counts its TPOT as 0).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from contracts.errors import InputError
from contracts.latency import (
    METRIC_COLUMNS,
    quantile,
    request_outcomes,
    request_values,
)
from planner.slo.spec import (
    Slo,
)

__all__ = [
    "REPORTED_QUANTILES",
    "TIME_COLUMNS",
    "ConstraintResult",
    "SloEvaluation",
    "evaluate",
    "exclude_warmup",
    "good_mask",
]

# Columns that tell when a request was scheduled, in order of preference (warm-up exclusion).
TIME_COLUMNS = ("intended_send_s", "sent_s", "arrival_s")
REPORTED_QUANTILES = (0.5, 0.9, 0.95, 0.99)


@dataclass(frozen=True, kw_only=True)
class ConstraintResult:
    """One constraint's verdict. `margin` >= 0 passes, in the metric's unit (s or share)."""

    name: str
    value: float | None
    threshold: float
    margin: float | None
    passed: bool
    interval: tuple[float, float] | None
    higher_is_better: bool = False

    @property
    def certain(self) -> bool:
        """The bootstrap interval lies wholly on the verdict's side of the threshold."""
        if self.value is None:
            return True  # nothing succeeded: no sample can pass
        if self.interval is None:
            return False
        low, high = self.interval
        if self.higher_is_better:
            return low >= self.threshold if self.passed else high < self.threshold
        return high <= self.threshold if self.passed else low > self.threshold

    @property
    def headroom(self) -> float:
        """Margin relative to the room the threshold allows; < 0 fails. Used to rank."""
        if self.value is None or self.margin is None:
            return -math.inf
        room = (1.0 - self.threshold) if self.higher_is_better else self.threshold
        if room <= 0:
            return 0.0 if self.margin >= 0 else -math.inf
        return self.margin / room


@dataclass(frozen=True)
class SloEvaluation:
    """A stage judged against an SLO (after the warm-up window was excluded).

    `errors` counts failed requests (not censored ones); `completed` the successful ones.
    """

    constraints: tuple[ConstraintResult, ...]
    scheduled: int
    completed: int
    errors: int
    good: int
    duration_s: float
    goodput_rps: float
    attainment: float | None
    error_rate: float | None
    achieved_rps: float
    mean_e2e_s: float | None
    metrics: dict[str, float | None] = field(default_factory=dict)
    censored: int = 0  # still running when the window closed (counted at their age)
    errors_by_class: dict[str, int] = field(default_factory=dict)  # failed requests by class

    @property
    def passed(self) -> bool:
        return bool(self.constraints) and all(c.passed for c in self.constraints)

    @property
    def certain(self) -> bool:
        """The verdict holds across the bootstrap intervals.

        A pass is certain when every constraint certainly passes; a fail when at least one
        constraint certainly fails.
        """
        if self.passed:
            return all(c.certain for c in self.constraints)
        return any((not c.passed) and c.certain for c in self.constraints)

    @property
    def binding(self) -> str | None:
        """The constraint with the least headroom: the one failing (or closest to failing)."""
        if not self.constraints:
            return None
        return min(self.constraints, key=lambda c: c.headroom).name

    def constraint(self, name: str) -> ConstraintResult:
        for result in self.constraints:
            if result.name == name:
                return result
        raise KeyError(name)


def _require_columns(records: pl.DataFrame, names: Iterable[str]) -> None:
    missing = [n for n in names if n not in records.columns]
    if missing:
        raise InputError(
            f"records lack column(s) {', '.join(missing)} needed by the SLO "
            f"(have: {', '.join(records.columns)})"
        )


def exclude_warmup(
    records: pl.DataFrame, warmup_s: float, *, start_s: float | None = None
) -> pl.DataFrame:
    """Drop the requests scheduled in the first `warmup_s` seconds after `start_s`.

    The schedule time is the first of TIME_COLUMNS present; `start_s` defaults to the
    earliest schedule time. Raises InputError when warm-up is asked but no time column exists.
    """
    if warmup_s <= 0 or records.height == 0:
        return records
    time_col = next((c for c in TIME_COLUMNS if c in records.columns), None)
    if time_col is None:
        raise InputError(
            f"excluding a warm-up needs one of the columns {', '.join(TIME_COLUMNS)} in the records"
        )
    start = start_s
    if start is None:
        first = records[time_col].min()
        start = float(first) if isinstance(first, int | float) else 0.0
    return records.filter(pl.col(time_col) >= start + warmup_s)


def good_mask(records: pl.DataFrame, slo: Slo) -> np.ndarray:
    """Per request: succeeded and meets every per-request threshold of the SLO (inclusive).

    Works on load-test records and on simulated per-request results alike (columns `ok` and
    the metrics' `*_s` columns). A missing TPOT (one output token) meets any TPOT bound. A
    censored request is good only when its lower bounds meet every threshold; a failed one
    never is.
    """
    _require_columns(records, ["ok", *(METRIC_COLUMNS[t.metric] for t in slo.request_thresholds)])
    ok, censored = request_outcomes(records)
    good = ok | censored
    for threshold in slo.request_thresholds:
        values = request_values(records, threshold.metric)
        missing = np.isnan(values)
        within = np.where(missing, threshold.metric == "tpot", values <= threshold.threshold_s)
        good &= within
    return good


def _statistic(values: np.ndarray, q: float | None) -> float:
    if q is None:
        return float(values.mean())
    return float(quantile(values, q))


def _block_length(n: int, ordered: bool) -> int:
    """Moving-block length: sqrt(n) for values in send order, 1 (plain bootstrap) otherwise.

    Latencies of neighbouring requests are correlated (a queue builds and drains over many
    requests), so resampling single requests would understate the noise of a percentile.
    """
    return max(1, math.ceil(math.sqrt(n))) if ordered else 1


def _bootstrap(
    values: np.ndarray,
    q: float | None,
    rng: np.random.Generator,
    resamples: int,
    confidence: float,
    block: int = 1,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of a statistic (a quantile, or the mean when None).

    With `block` > 1, a moving-block bootstrap: each resample strings together random runs of
    `block` consecutive values, so correlation between neighbours is kept.
    """
    n = values.size
    if n < 2:
        return None
    block = min(block, n)
    blocks = math.ceil(n / block)
    offsets = np.arange(block)
    # Resample in chunks so a big stage stays within a few tens of MB.
    chunk = max(1, min(resamples, 4_000_000 // n))
    stats: list[np.ndarray] = []
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        starts = rng.integers(0, n - block + 1, size=(size, blocks))
        index = (starts[:, :, None] + offsets).reshape(size, blocks * block)[:, :n]
        sample = values[index]
        stats.append(sample.mean(axis=1) if q is None else quantile(sample, q, axis=1))
        done += size
    all_stats = np.concatenate(stats)
    alpha = (1.0 - confidence) / 2.0
    return float(quantile(all_stats, alpha)), float(quantile(all_stats, 1.0 - alpha))


def evaluate(
    records: pl.DataFrame,
    slo: Slo,
    *,
    duration_s: float,
    warmup_s: float = 0.0,
    start_s: float | None = None,
    rng: np.random.Generator | None = None,
    resamples: int = 400,
    confidence: float = 0.95,
    block: int | None = None,
) -> SloEvaluation:
    """Judge one stage's per-request records against `slo`.

    `records` has one row per scheduled request with `ok` and the `*_s` metric columns the
    SLO names (RECORD_COLUMNS of contracts.run, or a simulator's ttft_s / tpot_s /
    e2e_s / ok). Requests scheduled in the first `warmup_s` seconds of the stage (from
    `start_s`, default the first schedule time) are excluded, and goodput is taken over
    `duration_s - warmup_s`. Each constraint gets a percentile-bootstrap interval at
    `confidence` drawn with `rng` (seeded default), a moving-block bootstrap over requests
    in send order with blocks of `block` requests (default sqrt(n)). Raises InputError on
    missing columns.
    """
    if duration_s <= 0:
        raise InputError(f"stage duration must be > 0 s, got {duration_s}")
    if rng is None:
        rng = np.random.default_rng(0)
    kept = exclude_warmup(records, warmup_s, start_s=start_s)
    window_s = max(duration_s - max(warmup_s, 0.0), 1e-9)
    metric_cols = {METRIC_COLUMNS[c.metric] for c in slo.percentiles}
    _require_columns(kept, ["ok", *sorted(metric_cols)])

    time_col = next((c for c in TIME_COLUMNS if c in kept.columns), None)
    if time_col is not None:
        kept = kept.sort(time_col, nulls_last=True)
    ordered = time_col is not None
    ok, censored = request_outcomes(kept)
    failed = ~ok & ~censored
    scheduled = int(kept.height)
    completed = int(ok.sum())
    errors = int(failed.sum())
    good = good_mask(kept, slo) if slo.request_thresholds else ok
    n_good = int(good.sum())
    # goodput counts requests that finished within the SLO (vLLM's --goodput, DistServe): a
    # request still in flight when the window closed may count toward attainment, never here
    # (it put a level's goodput above its offered load: 13.2 req/s at 12.3 in the demo)
    good_done = int((good & ok).sum())
    successful = kept.filter(pl.Series(ok))

    def column_values(col: str) -> np.ndarray:
        values = successful[col].cast(pl.Float64).to_numpy()
        return values[~np.isnan(values)]

    results: list[ConstraintResult] = []
    for constraint in slo.percentiles:
        values = request_values(kept, constraint.metric, success_only=slo.success_only)
        values = values[~np.isnan(values)]
        if values.size == 0:
            # One-token outputs have no TPOT: vLLM counts it as 0, so it cannot fail.
            no_sample_passes = constraint.metric == "tpot" and completed > 0
            results.append(
                ConstraintResult(
                    name=constraint.name,
                    value=0.0 if no_sample_passes else None,
                    threshold=constraint.threshold_s,
                    margin=constraint.threshold_s if no_sample_passes else None,
                    passed=no_sample_passes,
                    interval=None,
                )
            )
            continue
        value = _statistic(values, constraint.quantile)
        size = block or _block_length(values.size, ordered)
        interval = _bootstrap(values, constraint.quantile, rng, resamples, confidence, size)
        results.append(
            ConstraintResult(
                name=constraint.name,
                value=value,
                threshold=constraint.threshold_s,
                margin=constraint.threshold_s - value,
                passed=value <= constraint.threshold_s,
                interval=interval,
            )
        )
    attainment = n_good / scheduled if scheduled else None
    error_rate = errors / scheduled if scheduled else None
    shares = (
        ("attainment", good, attainment, slo.min_attainment, True),
        ("errors", failed, error_rate, slo.max_error_rate, False),
    )
    for name, flags, share, bound, at_least in shares:
        if bound is None:
            continue
        size = block or _block_length(scheduled, ordered)
        interval = _bootstrap(flags.astype(float), None, rng, resamples, confidence, size)
        margin = None if share is None else (share - bound if at_least else bound - share)
        passed = share is not None and (share >= bound if at_least else share <= bound)
        results.append(
            ConstraintResult(
                name=name,
                value=share,
                threshold=bound,
                margin=margin,
                passed=passed,
                interval=interval,
                higher_is_better=at_least,
            )
        )

    metrics: dict[str, float | None] = {}
    for name, col in METRIC_COLUMNS.items():
        if col not in successful.columns:
            continue
        values = column_values(col)
        for q in REPORTED_QUANTILES:
            key = f"{name}_p{q * 100:g}_s"
            metrics[key] = float(np.quantile(values, q)) if values.size else None
        metrics[f"{name}_mean_s"] = float(values.mean()) if values.size else None
    if "schedule_lag_s" in kept.columns:
        lag = kept["schedule_lag_s"].cast(pl.Float64).to_numpy()
        lag = lag[~np.isnan(lag)]
        metrics["schedule_lag_p95_s"] = float(np.quantile(lag, 0.95)) if lag.size else None
        metrics["schedule_lag_p99_s"] = float(np.quantile(lag, 0.99)) if lag.size else None
    errors_by_class: dict[str, int] = {}
    if errors and "error_class" in kept.columns:
        classes = kept.filter(pl.Series(failed))["error_class"].fill_null("unknown")
        errors_by_class = dict(sorted(Counter(classes.to_list()).items()))
    mean_e2e = metrics.get("e2e_mean_s")
    metrics["error_rate"] = error_rate
    metrics["censored"] = float(censored.sum())
    metrics["attainment"] = attainment
    metrics["goodput_rps"] = good_done / window_s
    metrics["achieved_rps"] = completed / window_s
    return SloEvaluation(
        constraints=tuple(results),
        scheduled=scheduled,
        completed=completed,
        errors=errors,
        good=n_good,
        duration_s=window_s,
        goodput_rps=good_done / window_s,
        attainment=attainment,
        error_rate=error_rate,
        achieved_rps=completed / window_s,
        mean_e2e_s=mean_e2e,
        metrics=metrics,
        censored=int(censored.sum()),
        errors_by_class=errors_by_class,
    )
