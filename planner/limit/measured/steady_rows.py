"""The steady-state rules (planner.limit.measured.steady) on arrays: a level's records read
once into numpy columns (`RecordColumns`), so that `assess_rows` judges any subset of them
(the records known at each pause of a virtual level, planner.limit.predict) by numpy
selections instead of polars ones, with the same verdict to the bit
(tests/planner/limit/test_steady_rows.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import pyarrow.compute as pc

from contracts.latency import bool_values, float_values, request_outcomes, request_values
from planner.limit.measured.steady import (
    LevelState,
    SteadyRules,
    _assess,
    _correlation,
    _in_flight,
    _larger_e2e,
    _slo_bounds,
)
from planner.slo.spec import Slo
from planner.slo.verdict import TIME_COLUMNS


@dataclass(frozen=True)
class RecordColumns:
    """What `assess` reads of a level's records, as arrays read once (row i: record i), so
    that `assess_rows` judges any subset of them (the ones known at a check) by numpy
    selections instead of polars ones. Every value is row-wise (the verdict's per-request
    values too), so a subset's are its rows'; `assess_rows(c, rows, ...)` is
    `assess(records[rows], ...)` for rows in ascending order."""

    frame_of: Callable[[], pl.DataFrame]  # the records, built when a check needs the frame
    time_col: str | None  # the schedule time's column
    time: np.ndarray  # its values, null -inf and NaN +inf (as polars compares them)
    e2e: np.ndarray
    e2e_kept: np.ndarray  # successful, with an E2E: what the finished mean counts
    sent: np.ndarray | None  # in_flight_series' send times and ends (None: it has none)
    ends: np.ndarray | None
    values: dict[str, np.ndarray]  # request_values of each SLO metric

    @cached_property
    def records(self) -> pl.DataFrame:
        return self.frame_of()

    @classmethod
    def of(cls, records: pl.DataFrame, slo: Slo) -> RecordColumns:
        cols = records.columns
        time_col = next((c for c in TIME_COLUMNS if c in cols), None)
        time = np.zeros(records.height)
        if time_col is not None:
            time = float_values(records[time_col], null=-np.inf, nan=np.inf)
        e2e, e2e_kept = np.zeros(records.height), np.zeros(records.height, dtype=bool)
        if "e2e_s" in cols and records.height:
            e2e = records["e2e_s"].to_numpy()
            ok = bool_values(records["ok"])
            e2e_kept = ok & ~np.asarray(pc.is_null(records["e2e_s"].to_arrow()), dtype=bool)
        sent = ends = None
        send_col = next((c for c in ("sent_s", *TIME_COLUMNS) if c in cols), None)
        if send_col is not None and ("end_s" in cols or "e2e_s" in cols):
            sent = float_values(records[send_col])
            if "end_s" in cols:
                ends = float_values(records["end_s"], null=np.inf)
            else:
                ends = sent + float_values(records["e2e_s"], null=np.inf)
        outcomes = request_outcomes(records)
        metrics = dict.fromkeys(metric for metric, _ in _slo_bounds(slo))
        values = {
            m: request_values(records, m, success_only=slo.success_only, outcomes=outcomes)
            for m in metrics
        }
        return cls(lambda: records, time_col, time, e2e, e2e_kept, sent, ends, values)

    @classmethod
    def of_simulated(
        cls,
        arrival_s: np.ndarray,
        ttft_s: np.ndarray,
        e2e_s: np.ndarray,
        tpot_s: np.ndarray,
        slo: Slo,
        frame_of: Callable[[], pl.DataFrame],
    ) -> RecordColumns:
        """`of(simulated_records(arrival_s, ttft_s, e2e_s, tpot_s), slo)` read from the
        arrays themselves (NaN: not finished, or none), the frame built by `frame_of` only
        when a check needs it. A simulated request is sent when scheduled, succeeded once
        finished, and is never censored (planner.limit.predict.simulated_records)."""
        finished = ~np.isnan(e2e_s)
        ends = np.where(finished, arrival_s + e2e_s, np.inf)
        measured = {"ttft": ttft_s, "tpot": tpot_s, "e2e": e2e_s}
        missed = np.nan if slo.success_only else np.inf  # request_values of a failure
        values = {}
        for metric, _ in _slo_bounds(slo):
            value = measured.get(metric, np.full(arrival_s.size, np.nan))  # itl_max: none
            values[metric] = np.where(finished, value, missed)
        return cls(frame_of, TIME_COLUMNS[0], arrival_s, e2e_s, finished, arrival_s, ends, values)

    def in_flight(self, rows: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
        """`in_flight_series(records[rows], start_s, end_s)`'s counts (its grid: 0.5 s)."""
        grid = np.arange(start_s, end_s + 1e-9, 0.5)
        if rows.size == 0 or grid.size == 0 or self.sent is None or self.ends is None:
            return np.zeros(grid.size)
        return _in_flight(grid, self.sent[rows], self.ends[rows])


def assess_rows(
    columns: RecordColumns,
    rows: np.ndarray,
    *,
    start_s: float,
    now_s: float,
    rate_rps: float | None,
    rules: SteadyRules,
    slo: Slo,
    in_flight: tuple[np.ndarray, np.ndarray],
) -> LevelState:
    """`assess` of the records at `rows` (ascending) of `columns`."""

    def mean_e2e(in_flight_mean: float | None, rate: float | None) -> float | None:
        kept = rows[columns.e2e_kept[rows]]
        finished = float(pl.Series(columns.e2e[kept]).mean()) if kept.size else None  # type: ignore[arg-type]
        return _larger_e2e(finished, in_flight_mean, rate)

    def window_from(at_s: float) -> _RowWindow:
        if columns.time_col is None:
            return _RowWindow(columns, rows)
        return _RowWindow(columns, rows[columns.time[rows] >= at_s])

    return _assess(rows.size, mean_e2e, window_from, start_s=start_s, now_s=now_s,
                   rate_rps=rate_rps, rules=rules, slo=slo, in_flight=in_flight)  # fmt: skip


@dataclass(frozen=True)
class _RowWindow:
    columns: RecordColumns
    rows: np.ndarray

    @property
    def height(self) -> int:
        return int(self.rows.size)

    @property
    def time_col(self) -> str | None:
        return self.columns.time_col

    @property
    def timed(self) -> bool:
        return self.columns.time_col is not None

    def correlation(self, slo: Slo) -> float:
        rows, t = self.rows, self.columns.time[self.rows]
        if np.any(t[1:] < t[:-1]):  # send order (a stable sort: ties keep record order)
            rows = rows[np.argsort(t, kind="stable")]
        return _correlation(slo, lambda metric: self.columns.values[metric][rows])

    def frame(self) -> pl.DataFrame:
        return self.columns.records[self.rows]
