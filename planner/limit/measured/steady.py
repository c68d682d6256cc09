"""Steady state of a load level: when its warm-up is over, when its window is long enough to
judge, and whether the system settled (queue not growing, tail not climbing).

Pure: records and an in-flight series in, a `LevelState` out. The same rules run beside a
live Locust level (planner.limit watches the records as they are written and ends the level
once it is ready) and over a simulated level in virtual time (planner.limit.predict), so a
predicted limit and a measured one follow one definition.

The rules (`SteadyRules`):
- mean E2E is estimated by Little's law (mean requests in flight / arrival rate) and by the
  finished requests, whichever is larger (early in a level the finished ones are the short
  ones);
- correlation time: the integrated autocorrelation time of the SLO's latencies in send order
  (Sokal's window), in requests: a queue that builds and drains, or still climbs from the
  empty start, makes neighbouring requests alike, and a percentile over n of them is as
  noisy as one over n / tau independent ones;
- warm-up: at least `min_warmup_s`, `warmup_e2es` mean E2Es and `warmup_taus` correlation
  times (tau / rate seconds) from the level's start;
- the measured window then runs at least `min_window_s`, `window_e2es` mean E2Es and holds
  `min_window_requests` scheduled requests and `effective_requests` independent ones
  (requests / tau);
- settled: the window's second half holds no more requests in flight than its first beyond
  noise (`growth_sigmas` Poisson standard deviations and 10 %), and the SLO's verdict does
  not turn from a certain pass in the first half to a certain fail in the second;
- a level that has not settled when it reaches `max_level_s` is unstable: it fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field
from scipy.fft import next_fast_len

from contracts.errors import ConfigError
from contracts.latency import request_outcomes, request_values
from planner.slo.spec import Slo
from planner.slo.verdict import TIME_COLUMNS, evaluate


class SteadyRules(BaseModel):
    """How long a level warms up and is measured, and when it counts as settled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_warmup_s: float = Field(default=5.0, ge=0, description="warm-up at least this long")
    warmup_e2es: float = Field(default=10.0, ge=0, description="and this many mean E2Es")
    min_window_s: float = Field(default=30.0, gt=0, description="measured window at least")
    window_e2es: float = Field(default=5.0, ge=0, description="and this many mean E2Es")
    min_window_requests: int = Field(default=100, ge=1, description="and this many requests")
    max_level_s: float = Field(default=900.0, gt=0, description="a level runs at most this long")
    growth_sigmas: float = Field(default=3.0, gt=0, description="queue growth beyond noise")
    effective_requests: float = Field(
        default=100.0, ge=0, description="window holds this many independent requests"
    )
    tail_requests: float = Field(
        default=10.0, ge=0, description="and this many independent ones in the SLO's tail"
    )
    warmup_taus: float = Field(default=3.0, ge=0, description="warm-up in correlation times")

    def model_post_init(self, _context: object) -> None:
        if self.max_level_s < self.min_warmup_s + self.min_window_s:
            raise ConfigError(
                f"the longest level ({self.max_level_s:g} s) is shorter than the warm-up "
                f"({self.min_warmup_s:g} s) plus the shortest window ({self.min_window_s:g} s)"
            )


@dataclass(frozen=True)
class LevelState:
    """Where a level stands at `elapsed_s` from its start.

    `warmup_s`: the warm-up (from the level's start) the rules ask for now; `window_s`: the
    measured time after it; `ready`: the window is long enough to judge; `unstable`: why the
    level has not settled (None when it has); `done`: stop now (ready and settled, or the
    cap reached).
    """

    elapsed_s: float
    warmup_s: float
    window_s: float
    mean_e2e_s: float | None
    window_requests: int
    ready: bool
    unstable: str | None
    capped: bool
    in_flight_first: float | None = None
    in_flight_second: float | None = None
    correlation: float = 1.0  # requests per independent one in the window (1: none)

    @property
    def done(self) -> bool:
        return (self.ready and self.unstable is None) or self.capped

    def evidence(self) -> str:
        """One line for limit.json and the progress output."""
        e2e = "n/a" if self.mean_e2e_s is None else f"{self.mean_e2e_s:.2f} s"
        text = (
            f"warm-up {self.warmup_s:.0f} s, window {self.window_s:.0f} s "
            f"({self.window_requests} requests), mean e2e {e2e}"
        )
        if self.correlation > 1.0:
            independent = self.window_requests / self.correlation
            text += (
                f", correlated over {self.correlation:.0f} requests "
                f"(~{independent:.0f} independent)"
            )
        if self.in_flight_first is not None and self.in_flight_second is not None:
            text += f", in flight {self.in_flight_first:.1f} -> {self.in_flight_second:.1f}"
        if self.unstable is not None:
            text += f"; unstable: {self.unstable}"
        return text


def in_flight_series(
    records: pl.DataFrame, start_s: float, end_s: float, step_s: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Requests in flight at each `step_s` from `start_s` to `end_s`, from finished records.

    A request is in flight from its send (`sent_s`, else its schedule time) until `end_s`;
    a record without an end is in flight until `end_s` of the series.
    """
    grid = np.arange(start_s, end_s + 1e-9, step_s)
    if records.height == 0 or grid.size == 0:
        return grid, np.zeros(grid.size)
    send_col = next((c for c in ("sent_s", *TIME_COLUMNS) if c in records.columns), None)
    if send_col is None:
        return grid, np.zeros(grid.size)
    sent = records[send_col].cast(pl.Float64).to_numpy()
    if "end_s" in records.columns:
        ends = records["end_s"].cast(pl.Float64).fill_null(np.inf).to_numpy()
    elif "e2e_s" in records.columns:
        ends = sent + records["e2e_s"].cast(pl.Float64).fill_null(np.inf).to_numpy()
    else:
        return grid, np.zeros(grid.size)
    return grid, _in_flight(grid, sent, ends)


def _in_flight(grid: np.ndarray, sent: np.ndarray, ends: np.ndarray) -> np.ndarray:
    sent = np.sort(sent[~np.isnan(sent)])
    ends = np.sort(np.where(np.isnan(ends), np.inf, ends))
    started = np.searchsorted(sent, grid, side="right")
    finished = np.searchsorted(ends, grid, side="right")
    return (started - finished).astype(float)


def _mean_e2e(
    records: pl.DataFrame, in_flight_mean: float | None, rate_rps: float | None
) -> float | None:
    finished: float | None = None
    if "e2e_s" in records.columns and records.height:
        e2e = records.filter(pl.col("ok").fill_null(False))["e2e_s"].drop_nulls()
        if e2e.len():
            finished = float(e2e.mean())  # type: ignore[arg-type]
    return _larger_e2e(finished, in_flight_mean, rate_rps)


def _larger_e2e(
    finished: float | None, in_flight_mean: float | None, rate_rps: float | None
) -> float | None:
    littles: float | None = None
    if in_flight_mean is not None and rate_rps:
        littles = in_flight_mean / rate_rps
    candidates = [x for x in (finished, littles) if x is not None and math.isfinite(x)]
    return max(candidates) if candidates else None


def assess(
    records: pl.DataFrame,
    *,
    start_s: float,
    now_s: float,
    rate_rps: float | None,
    rules: SteadyRules,
    slo: Slo,
    in_flight: tuple[np.ndarray, np.ndarray] | None = None,
) -> LevelState:
    """Where the level started at `start_s` stands at `now_s`.

    `records`: the level's requests known so far (finished ones, and censored ones at the
    end); `rate_rps`: its arrival rate (None for closed loops: the completion rate stands
    in); `in_flight`: (times, counts) sampled during the level — by default reconstructed
    from the records.
    """
    if in_flight is None:
        in_flight = in_flight_series(records, start_s, now_s)
    time_col = next((c for c in TIME_COLUMNS if c in records.columns), None)

    def window_from(at_s: float) -> _FrameWindow:
        if time_col is None:
            return _FrameWindow(records, None)
        return _FrameWindow(records.filter(pl.col(time_col) >= at_s), time_col)

    return _assess(
        records.height,
        lambda littles, rate: _mean_e2e(records, littles, rate),
        window_from,
        start_s=start_s,
        now_s=now_s,
        rate_rps=rate_rps,
        rules=rules,
        slo=slo,
        in_flight=in_flight,
    )


def _assess(
    height: int,
    mean_e2e: Callable[[float | None, float | None], float | None],
    window_from: Callable[[float], _Window],
    *,
    start_s: float,
    now_s: float,
    rate_rps: float | None,
    rules: SteadyRules,
    slo: Slo,
    in_flight: tuple[np.ndarray, np.ndarray],
) -> LevelState:
    """`assess` over `height` records whose mean E2E (given the in-flight mean and the rate)
    and whose window from a time on the callables give."""
    elapsed_s = max(now_s - start_s, 0.0)
    times, counts = in_flight
    recent = counts[times >= start_s + 0.5 * elapsed_s] if times.size else counts
    in_flight_mean = float(recent.mean()) if recent.size else None
    if rate_rps is None and elapsed_s > 0:
        rate_rps = height / elapsed_s if height else None
    mean_e2e_s = mean_e2e(in_flight_mean, rate_rps)
    e2e = mean_e2e_s or 0.0
    warmup_s = min(max(rules.min_warmup_s, rules.warmup_e2es * e2e), elapsed_s)
    in_window = window_from(start_s + warmup_s)
    tau = 1.0
    independent = max(rules.effective_requests, rules.tail_requests / tail_share(slo))
    if (independent or rules.warmup_taus) and in_window.timed:
        tau = in_window.correlation(slo)
    tau_s = tau / rate_rps if rate_rps else 0.0
    if rules.warmup_taus and tau_s > 0:
        longer = min(max(warmup_s, rules.min_warmup_s + rules.warmup_taus * tau_s), elapsed_s)
        if longer > warmup_s:
            warmup_s = longer
            in_window = window_from(start_s + warmup_s)
    window_s = max(elapsed_s - warmup_s, 0.0)
    window_start = start_s + warmup_s
    ready = bool(
        elapsed_s >= rules.min_warmup_s + rules.warmup_e2es * e2e
        and window_s >= max(rules.min_window_s, rules.window_e2es * e2e)
        and in_window.height >= rules.min_window_requests
        and in_window.height >= independent * tau
    )
    capped = elapsed_s >= rules.max_level_s
    first = second = None
    unstable: str | None = None
    if window_s > 0 and times.size:
        mid = window_start + window_s / 2
        a = counts[(times >= window_start) & (times < mid)]
        b = counts[times >= mid]
        if a.size and b.size:
            first, second = float(a.mean()), float(b.mean())
            grows = second - first
            if grows > rules.growth_sigmas * math.sqrt(first + 1.0) and grows > 0.1 * first:
                unstable = f"queue grows {grows / (window_s / 2):.2g} req/s"
    if unstable is None and ready and in_window.time_col is not None:
        unstable = _tail_climbs(in_window.frame(), slo, in_window.time_col, window_start, now_s)
    return LevelState(
        elapsed_s=elapsed_s,
        warmup_s=warmup_s,
        window_s=window_s,
        mean_e2e_s=mean_e2e_s,
        window_requests=in_window.height,
        ready=ready,
        unstable=unstable,
        capped=capped,
        in_flight_first=first,
        in_flight_second=second,
        correlation=float(tau),
    )


class _Window(Protocol):
    """A level's records scheduled from a time on, as `_assess` reads them."""

    @property
    def height(self) -> int: ...
    @property
    def time_col(self) -> str | None: ...  # None: the records have no schedule time
    @property
    def timed(self) -> bool: ...
    def correlation(self, slo: Slo) -> float: ...  # correlation_requests in send order
    def frame(self) -> pl.DataFrame: ...  # the records, in their order


@dataclass(frozen=True)
class _FrameWindow:
    records: pl.DataFrame
    time_col: str | None

    @property
    def height(self) -> int:
        return self.records.height

    @property
    def timed(self) -> bool:
        return self.time_col is not None

    def correlation(self, slo: Slo) -> float:
        assert self.time_col is not None
        return correlation_requests(self.records.sort(self.time_col), slo)

    def frame(self) -> pl.DataFrame:
        return self.records


def _tail_climbs(
    window: pl.DataFrame, slo: Slo, time_col: str, start_s: float, end_s: float
) -> str | None:
    """A certain pass in the window's first half turned into a certain fail in its second."""
    mid = (start_s + end_s) / 2
    halves = [
        window.filter(pl.col(time_col) < mid),
        window.filter(pl.col(time_col) >= mid),
    ]
    if any(h.height < 20 for h in halves):
        return None
    half_s = max((end_s - start_s) / 2, 1e-9)
    early, late = (evaluate(h, slo, duration_s=half_s, resamples=50) for h in halves)
    for a in early.constraints:
        b = late.constraint(a.name)
        if a.passed and a.certain and not b.passed and b.certain:
            return f"{a.name} went from {_fmt(a.value)} to {_fmt(b.value)} within the window"
    return None


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return "inf"
    return f"{value:.3g}"


def tail_share(slo: Slo) -> float:
    """The share of requests an SLO lets miss at its strictest: 1 - q of its highest
    percentile, 1 - the attainment, or 0.5 (the mean, a median-like statistic)."""
    shares = [1.0 - (c.quantile if c.quantile is not None else 0.5) for c in slo.percentiles]
    if slo.min_attainment is not None:
        shares.append(1.0 - slo.min_attainment)
    return max(min(shares, default=0.5), 1e-4)


def correlation_requests(window: pl.DataFrame, slo: Slo) -> float:
    """The integrated autocorrelation time, in requests, of the SLO's latency values in send
    order (Sokal's self-consistent window): how many consecutive requests carry about one
    request's worth of independent information. A queue that builds and drains, or still
    climbs from an empty start, makes neighbours alike and this large."""
    outcomes: list[tuple[np.ndarray, np.ndarray]] = []

    def values_of(metric: str) -> np.ndarray:
        if not outcomes:
            outcomes.append(request_outcomes(window))
        return request_values(window, metric, success_only=slo.success_only, outcomes=outcomes[0])

    return _correlation(slo, values_of)


def _slo_bounds(slo: Slo) -> list[tuple[str, float]]:
    """The SLO's (metric, threshold) pairs, each once: a percentile and a per-request
    threshold on the same bound (the usual pair) give one series."""
    bounds = [(c.metric, c.threshold_s) for c in slo.percentiles]
    bounds += [(t.metric, t.threshold_s) for t in slo.request_thresholds]
    return list(dict.fromkeys(bounds))


def _correlation(slo: Slo, values_of: Callable[[str], np.ndarray]) -> float:
    """`correlation_requests` over the per-request values `values_of` gives per metric."""
    taus = [1.0]
    read: dict[str, np.ndarray] = {}
    for metric, threshold_s in _slo_bounds(slo):
        values = read.get(metric)
        if values is None:
            values = values_of(metric)
            values = read[metric] = values[~np.isnan(values)]
        if values.size < 20:
            continue
        values = np.minimum(values, 4.0 * threshold_s)  # misses count, bounded
        taus.append(integrated_autocorrelation(values))
    return max(taus)


def integrated_autocorrelation(x: np.ndarray, c: float = 5.0) -> float:
    """1 + 2 sum of the autocorrelations up to the first lag m >= c * tau(m) (Sokal)."""
    x = x - x.mean()
    n = x.size
    var = float(np.dot(x, x)) / n
    if var <= 0 or n < 2:
        return 1.0
    # Zero-padded to a length of small prime factors at least 2n, so the circular
    # correlation is the linear one at every lag below n: pocketfft is several times slower
    # on 2n itself when n has a large prime factor (same tau to ~1e-15 relative).
    size = next_fast_len(2 * n, real=True)
    f = np.fft.rfft(x, size)
    acf = np.fft.irfft(f * np.conj(f), size)[:n] / (var * n)
    # tau(m) = 1 + 2 (acf[1] + ... + acf[m]), summed left to right as a loop would (cumsum
    # adds in order), up to the first m >= c * tau(m), else over every lag.
    steps = 2.0 * acf
    steps[0] = 1.0
    tau_m = np.cumsum(steps)
    lags = np.arange(n)
    stop = np.flatnonzero(lags[1:] >= c * tau_m[1:])
    tau = tau_m[stop[0] + 1] if stop.size else tau_m[-1]
    return max(tau, 1.0)
