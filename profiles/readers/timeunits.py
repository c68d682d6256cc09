"""Turning raw timestamps into seconds: epoch detection, units, and the wrong-unit warnings."""

from __future__ import annotations

import numpy as np

from contracts.errors import InputError

UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
TIME_UNITS = ("auto", *UNIT_SECONDS)

# Smallest raw value read as an epoch in each unit (all about the year 2001 or later).
_EPOCH_FLOOR = (("ns", 1e18), ("us", 1e15), ("ms", 1e12), ("s", 1e9))


MAX_SPAN_S = 4e7  # about 15 months: the longest span one profile covers


def typical(raw: np.ndarray) -> float:
    """The median of `raw` (cheap when it is sorted, as logs usually are)."""
    if raw.size == 0:
        return 0.0
    if raw.size < 3 or bool(np.all(raw[1:] >= raw[:-1])):
        return float(raw[raw.size // 2])
    return float(np.median(raw))


def far_from_median(seconds: np.ndarray, median_s: float | None = None) -> np.ndarray:
    """Rows whose time lies more than MAX_SPAN_S from the median (`median_s`, or the median
    of `seconds` when None): corrupt values."""
    if seconds.size == 0:
        return np.isnan(seconds)
    if median_s is None:
        if float(np.nanmax(seconds) - np.nanmin(seconds)) <= MAX_SPAN_S:
            return np.isnan(seconds)
        median_s = typical(seconds)
    elif (
        float(seconds.min()) >= median_s - MAX_SPAN_S
        and float(seconds.max()) <= median_s + MAX_SPAN_S
    ):
        return np.zeros(seconds.size, dtype=bool)  # the usual chunk: no row is far (nor NaN)
    return ~(np.abs(seconds - median_s) <= MAX_SPAN_S)


FAR_REASON = "timestamp far from the rest of the log (over 15 months from its median)"


def check_time_unit(unit: str) -> str:
    if unit not in TIME_UNITS:
        raise InputError(f"--time-unit {unit!r}: expected one of {', '.join(TIME_UNITS)}")
    return unit


def numeric_unit(raw_min: float, unit: str, default: str = "s") -> tuple[str, bool]:
    """The unit of numeric timestamps and whether they are epoch (absolute) times.

    With `unit="auto"`, values at or above about the year 2001 in s/ms/us/ns are epochs in that
    unit; smaller values are relative times in `default`.
    """
    if unit != "auto":
        return unit, raw_min * UNIT_SECONDS[unit] >= 1e9
    for name, floor in _EPOCH_FLOOR:
        if raw_min >= floor:
            return name, True
    return default, False


def unit_warnings(raw: np.ndarray, unit: str, absolute: bool, source: str) -> list[str]:
    """Warnings, with the evidence, when relative timestamps look like the wrong unit."""
    if absolute or raw.size < 20:
        return []
    gaps = np.diff(raw)
    ordered = raw
    if (gaps < 0).any():
        ordered = np.sort(raw)
        gaps = np.diff(ordered)
    positive = gaps[gaps > 0]
    if positive.size == 0:
        return []
    median_gap = float(np.median(positive))
    whole = bool(np.all(raw == np.round(raw)))
    span = float(ordered[-1] - ordered[0])
    if unit == "s" and whole and median_gap >= 50:
        return [
            f"{source}: timestamps read as seconds may be milliseconds: all {raw.size} values "
            f"are whole numbers, the median gap between requests is {median_gap:g} s and the "
            f"span is {span / 86400:.1f} days ({span / 1000 / 3600:.2f} h if milliseconds); "
            "pass --time-unit ms if so"
        ]
    if unit == "ms" and median_gap < 0.05 and span < 1000 and not whole:
        return [
            f"{source}: timestamps read as milliseconds may be seconds: the median gap is "
            f"{median_gap:g} ms and the whole span is {span:g} ms for {raw.size} requests; "
            "pass --time-unit s if so"
        ]
    return []
