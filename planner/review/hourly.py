"""Capacity by hour of day and weekly growth, from a profile's peak rate per clock hour.

Pure functions over `profiles.model.ClockHours`; instance counts come from
`planner.capacity.arithmetic.instances_for_load`, the same rule as the plan.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from scipy import stats

from contracts.finding import Finding
from contracts.review import DayTypeHours, FleetOption, GrowthTrend, HourlyCapacity
from planner.capacity.arithmetic import instances_for_load
from planner.capacity.cost import HOURS_PER_MONTH
from profiles.model import ClockHours

MIN_COVER = 0.5  # a clock hour counts when the log covers at least half of it
HOURS_PER_WEEK = 168
DayType = Literal["weekday", "weekend", "all"]


def _covered(clock: ClockHours) -> np.ndarray:
    return np.asarray(clock.covered_s) >= MIN_COVER * 3600.0


def _hour_starts(clock: ClockHours) -> list[dt.datetime]:
    return [
        dt.datetime.fromtimestamp(clock.first_hour_epoch_s + 3600.0 * i, dt.UTC)
        for i in range(len(clock.peak_rps))
    ]


def hourly_capacity(
    clock: ClockHours,
    count: Callable[[float], int],
    tp: int,
    gpu_hour_price_usd: float,
    scale_up_delay_s: float,
) -> HourlyCapacity | None:
    """Instances per hour of day and the three fleets' GPU-hours, or None under a day covered.

    `count(peak_rps)` is the instance count the plan's rule gives a peak (growth, headroom,
    limit and redundancy applied). Weekday and weekend are split where the log covers a
    full week; otherwise every day is one type. Fleets: sized for the highest hour all day;
    a fixed schedule that holds, in each hour of day, the most any covered day of that type
    needed; and an autoscaler that follows each clock hour's own need, starting new instances
    `scale_up_delay_s` before they are needed (the model load time).
    """
    keep = _covered(clock)
    if keep.sum() < 24:
        return None
    starts = _hour_starts(clock)
    peaks = np.asarray(clock.peak_rps)
    needed = np.array([count(float(p)) for p in peaks])
    split = keep.sum() >= HOURS_PER_WEEK
    types: tuple[DayType, ...] = ("weekday", "weekend") if split else ("all",)
    day_types: list[DayTypeHours] = []
    for day_type in types:
        inst: list[int | None] = [None] * 24
        peak: list[float | None] = [None] * 24
        days: set[dt.date] = set()
        for i, start in enumerate(starts):
            if not keep[i]:
                continue
            kind = "all" if not split else ("weekend" if start.weekday() >= 5 else "weekday")
            if kind != day_type:
                continue
            days.add(start.date())
            h = start.hour
            inst[h] = max(inst[h] or 0, int(needed[i]))
            peak[h] = max(peak[h] or 0.0, float(peaks[i]))
        day_types.append(
            DayTypeHours(day_type=day_type, days=len(days), instances=inst, peak_rps=peak)
        )

    top = int(needed[keep].max())
    hours = HOURS_PER_MONTH * tp
    # Fixed schedule: the mean over a week of the per-hour-of-day counts (weekdays 5/7).
    weights = {"weekday": 5 / 7, "weekend": 2 / 7, "all": 1.0}
    schedule_mean = 0.0
    for d in day_types:
        fill = [x for x in d.instances if x is not None]
        fallback = max(fill) if fill else top
        schedule_mean += weights[d.day_type] * float(
            np.mean([fallback if x is None else x for x in d.instances])
        )
    # Autoscaled: in clock hour t it holds n_t, plus for the delay before each rise the next
    # hours' higher count (held whole hours first, then a fraction of an hour).
    lead_h = scale_up_delay_s / 3600.0
    whole, frac = int(math.floor(lead_h)), lead_h - math.floor(lead_h)
    idx = np.flatnonzero(keep)
    held = []
    for i in map(int, idx):
        ahead_whole = needed[i : min(i + whole + 1, len(needed))].max()
        ahead_next = needed[i : min(i + whole + 2, len(needed))].max()
        held.append((1 - frac) * ahead_whole + frac * ahead_next)
    auto_mean = float(np.mean(held))
    options = [
        FleetOption(
            kind="peak_all_day",
            gpu_hours_per_month=top * hours,
            monthly_cost_usd=top * hours * gpu_hour_price_usd,
            **_rule(Finding(key="review.option_peak_all_day", values={"top": top})),
        ),
        FleetOption(
            kind="fixed_schedule",
            gpu_hours_per_month=schedule_mean * hours,
            monthly_cost_usd=schedule_mean * hours * gpu_hour_price_usd,
            **_rule(
                Finding(
                    key="review.option_fixed_schedule" + ("_split" if split else ""),
                )
            ),
        ),
        FleetOption(
            kind="autoscaled",
            gpu_hours_per_month=auto_mean * hours,
            monthly_cost_usd=auto_mean * hours * gpu_hour_price_usd,
            **_rule(Finding(key="review.option_autoscaled", values={"delay_s": scale_up_delay_s})),
        ),
    ]
    return HourlyCapacity(
        window_s=clock.window_s,
        hours_covered=int(keep.sum()),
        day_types=day_types,
        per_clock_hour_instances=[int(x) for x in needed[keep]],
        scale_up_delay_s=scale_up_delay_s,
        options=options,
        trough_instances=int(needed[keep].min()),
        peak_instances=top,
    )


def _rule(finding: Finding) -> dict[str, Any]:
    """A fleet option's rule, in English and as its finding."""
    return {"rule": finding.english(), "rule_finding": finding}


def rule_count(
    growth: float, headroom: float, redundancy: int, limit: float, per_rps: float
) -> Callable[[float], int]:
    """The plan's count for a peak in req/s: `per_rps` converts it to the limit's unit."""

    def count(peak_rps: float) -> int:
        return instances_for_load(peak_rps * per_rps * growth, limit, headroom) + redundancy

    return count


def next_quarter_end(day: dt.date) -> dt.date:
    """The last day of the calendar quarter after the one `day` is in."""
    q = (day.month - 1) // 3 + 1  # 1..4
    year, q_next = (day.year, q + 1) if q < 4 else (day.year + 1, 1)
    end_month = q_next * 3
    first_after = dt.date(year + (end_month == 12), end_month % 12 + 1, 1)
    return first_after - dt.timedelta(days=1)


def _r2(y: np.ndarray, fit: np.ndarray) -> float:
    ss = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - fit) ** 2).sum()) / ss if ss > 0 else 1.0


def weekly_peaks(clock: ClockHours) -> list[float]:
    """The highest hourly peak in each full week of the log (weeks from its first hour)."""
    keep = _covered(clock)
    peaks = np.where(keep, np.asarray(clock.peak_rps), np.nan)
    full = len(peaks) // HOURS_PER_WEEK
    out = []
    for w in range(full):
        block = peaks[w * HOURS_PER_WEEK : (w + 1) * HOURS_PER_WEEK]
        if np.isnan(block).mean() <= 0.5:
            out.append(float(np.nanmax(block)))
    return out


def growth_trend(clock: ClockHours, level: float, min_weeks: int = 3) -> GrowthTrend | None:
    """Fit weekly peaks with a line and an exponential; keep the better R² (in req/s).

    Projects the fit to the end of the next quarter (after the log's last hour), with a
    `level` prediction interval from the regression (t distribution, n - 2 degrees of
    freedom); the growth factor is the projection over the fitted peak of the last week.
    None when the log has fewer than `min_weeks` full weeks or a zero peak.
    """
    y = np.asarray(weekly_peaks(clock))
    n = len(y)
    if n < min_weeks or (y <= 0).any():
        return None
    x = np.arange(n, dtype=float)
    lin = np.polyfit(x, y, 1)
    lin_fit = np.polyval(lin, x)
    ex = np.polyfit(x, np.log(y), 1)
    ex_fit = np.exp(np.polyval(ex, x))
    r2_lin, r2_exp = _r2(y, lin_fit), _r2(y, ex_fit)
    model: Literal["linear", "exponential"] = "exponential" if r2_exp >= r2_lin else "linear"
    last_epoch = clock.first_hour_epoch_s + 3600.0 * len(clock.peak_rps)
    last_day = dt.datetime.fromtimestamp(last_epoch, dt.UTC).date()
    horizon = next_quarter_end(last_day)
    horizon_epoch = dt.datetime.combine(horizon, dt.time(23, 59), dt.UTC).timestamp()
    week_mid = clock.first_hour_epoch_s + (n - 0.5) * HOURS_PER_WEEK * 3600.0
    ahead = (horizon_epoch - week_mid) / (HOURS_PER_WEEK * 3600.0)
    xh = (n - 1) + ahead
    # Prediction interval at xh on the fitted scale (log for exponential).
    ys = np.log(y) if model == "exponential" else y
    coef = ex if model == "exponential" else lin
    resid = ys - np.polyval(coef, x)
    dof = max(n - 2, 1)
    s = math.sqrt(float((resid**2).sum()) / dof)
    sxx = float(((x - x.mean()) ** 2).sum())
    half = (
        float(stats.t.ppf(0.5 + level / 2, dof))
        * s
        * math.sqrt(1 + 1 / n + (xh - x.mean()) ** 2 / sxx)
    )
    centre = float(np.polyval(coef, xh))
    base = float(np.polyval(coef, n - 1))
    if model == "exponential":
        growth = math.exp(centre - base)
        lo, hi = math.exp(centre - half - base), math.exp(centre + half - base)
        weekly = math.exp(float(ex[0])) - 1
        slope = float(ex[0])
    else:
        growth = centre / base
        lo, hi = max(centre - half, 0.0) / base, (centre + half) / base
        weekly = float(lin[0]) / base
        slope = float(lin[0])
    r2 = r2_exp if model == "exponential" else r2_lin
    statement = Finding(
        key="review.trend",
        values={
            "model": model,
            "weeks": n,
            "r2": r2,
            "other_model": "linear" if model == "exponential" else "exponential",
            "r2_other": min(r2_lin, r2_exp),
            "weekly": weekly,
            "horizon": horizon.isoformat(),
            "ahead": ahead,
            "growth": growth,
            "level": level,
            "low": lo,
            "high": hi,
        },
    )
    return GrowthTrend(
        model=model,
        weeks=n,
        weekly_peak_rps=[float(v) for v in y],
        slope=slope,
        weekly_growth=weekly,
        r2=r2,
        r2_other=r2_lin if model == "exponential" else r2_exp,
        horizon=horizon.isoformat(),
        horizon_weeks=ahead,
        growth=growth,
        growth_low=lo,
        growth_high=hi,
        level=level,
        statement=statement.english(),
        statement_finding=statement,
    )
