"""What a probe measured while holding one load level, when to give a level up, and what a
probe is: the interface between the limit search (planner.limit.measured.search) and whatever holds
the load — Locust against a live endpoint (planner.limit), the engine model in virtual time
(planner.limit.predict), a simulated queue (testkit/slot_probe.py) or a fake in tests."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl

from contracts.latency import CENSORED_CLASSES, METRIC_COLUMNS, bool_values, float_values
from contracts.limit import Dimension
from planner.slo.spec import Slo, format_duration
from planner.slo.verdict import TIME_COLUMNS, exclude_warmup


@dataclass(frozen=True, kw_only=True)
class LevelMeasurement:
    """What a probe measured while holding one load level.

    `records` has one row per request scheduled in the level (RECORD_COLUMNS of
    contracts.run, or at least `ok` and the SLO's `*_s` columns). `duration_s` is how
    long the level was held (shorter than planned when abandoned); requests scheduled in
    its first `warmup_s` seconds from `start_s` (default: the first schedule time) are
    excluded from the verdict. `unstable` says why a level that ran to its cap never
    settled (it fails); `steady` is the steady-state evidence for limit.json.
    """

    load: float
    stage: str
    records: pl.DataFrame
    duration_s: float
    warmup_s: float = 0.0
    start_s: float | None = None
    abandoned: str | None = None
    unstable: str | None = None  # the level ran to its cap without settling: why
    steady: str | None = None  # the steady-state evidence (warm-up, window, queue)


@dataclass(frozen=True)
class AbandonRule:
    """Decides, from a level's partial records, that the level cannot pass (stop it early).

    A probe calls `hopeless` while a level runs, with the records so far: finished requests
    and, where it knows them, in-flight ones (null `first_token_s` / `end_s`, with `sent_s`).
    Hopeless when the error rate among finished requests reaches `error_rate` (after
    `min_finished` finished), or when more requests are already past a TTFT or E2E
    threshold — finished above it or still waiting longer than it — than the SLO allows in
    the whole level (queue growth makes the tail unrecoverable).

    `budget_s`: the run ends once it has lasted that long, steady or not, and is judged as it
    stands (not abandoned): the level that must hold a fast answer gets a budget, and where it
    is not certain within it the search steps down rather than holding it longer.
    `hopeless_checks` False: only the budget ends the run (a repeat settling a close verdict).
    """

    slo: Slo
    error_rate: float = 0.5
    min_finished: int = 20
    budget_s: float | None = None
    hopeless_checks: bool = True

    def hopeless(
        self,
        records: pl.DataFrame,
        *,
        now_s: float,
        start_s: float,
        duration_s: float,
        warmup_s: float,
        load: float,
        dimension: Dimension,
    ) -> str | None:
        """A reason to stop the level now, or None to keep going."""
        spans = self._spans(now_s, start_s, duration_s, warmup_s, records.height)
        if spans is None:
            return None
        elapsed_s, window_s = spans
        kept = exclude_warmup(records, warmup_s, start_s=start_s)
        if kept.height == 0:
            return None
        finished = kept.filter(pl.col("ok").is_not_null()) if "ok" in kept.columns else kept
        errors = 0
        if finished.height >= self.min_finished:
            errors = int((~finished["ok"]).sum())
        return self._reason(
            elapsed_s, window_s, warmup_s, load, dimension, kept.height, finished.height, errors,
            lambda metric, bound: _count_past(kept, metric, bound, now_s, self.slo.success_only),
        )  # fmt: skip

    def hopeless_rows(
        self,
        columns: AbandonColumns,
        rows: np.ndarray,
        *,
        now_s: float,
        start_s: float,
        duration_s: float,
        warmup_s: float,
        load: float,
        dimension: Dimension,
    ) -> str | None:
        """`hopeless(columns.records[rows], ...)` (rows ascending) by numpy selections."""
        spans = self._spans(now_s, start_s, duration_s, warmup_s, rows.size)
        if spans is None:
            return None
        elapsed_s, window_s = spans
        kept = rows[columns.time[rows] >= start_s + warmup_s] if warmup_s > 0 else rows
        if kept.size == 0:
            return None
        finished = int(columns.ok_known[kept].sum())
        errors = 0
        if finished >= self.min_finished:
            errors = int((columns.ok_known[kept] & ~columns.ok[kept]).sum())

        def count_past(metric: str, bound: float) -> int:
            ok = columns.ok[kept]  # null: False
            late = int((ok & (columns.metric[metric][kept] > bound)).sum())
            if not self.slo.success_only:
                late += int(columns.failed[kept].sum())
            waiting = columns.pending[metric]
            if waiting is None:
                return late
            pending = kept[waiting[kept]]
            return late + int((now_s - columns.send[pending] > bound).sum())

        return self._reason(
            elapsed_s, window_s, warmup_s, load, dimension, kept.size, finished, errors,
            count_past,
        )  # fmt: skip

    def _spans(
        self, now_s: float, start_s: float, duration_s: float, warmup_s: float, records: int
    ) -> tuple[float, float] | None:
        """(elapsed, window) seconds of a level with `records` so far, or None where it is
        not judged yet (in its warm-up, no window, no records, or checks off)."""
        elapsed_s = now_s - start_s
        window_s = duration_s - warmup_s
        if not self.hopeless_checks or elapsed_s <= warmup_s or window_s <= 0 or records == 0:
            return None
        return elapsed_s, window_s

    def _reason(
        self,
        elapsed_s: float,
        window_s: float,
        warmup_s: float,
        load: float,
        dimension: Dimension,
        kept: int,
        finished: int,
        errors: int,
        count_past: Callable[[str, float], int],
    ) -> str | None:
        """The verdict from the counts after warm-up: `kept` requests, `finished` of them
        with an outcome, `errors` failed (counted once `min_finished` finished)."""
        if finished >= self.min_finished and errors / finished >= self.error_rate:
            return f"{errors} of {finished} finished requests failed after {elapsed_s:.0f} s"
        if dimension == "rate":
            expected = load * window_s
        else:
            expected = kept * window_s / max(elapsed_s - warmup_s, 1e-9)
        # The level's final request count is not known yet: allow for two Poisson standard
        # deviations more requests than expected before calling the tail lost.
        most = expected + 2.0 * math.sqrt(max(expected, 1.0))
        for metric, threshold_s, allowed_share in self._tail_bounds():
            late = count_past(metric, threshold_s)
            allowed = allowed_share * most
            if late > allowed and late >= 2:
                return (
                    f"{late} requests already past {metric} {format_duration(threshold_s)} "
                    f"after {elapsed_s:.0f} s (the SLO allows about {allowed:.0f})"
                )
        return None

    def _tail_bounds(self) -> list[tuple[str, float, float]]:
        bounds: list[tuple[str, float, float]] = []
        for c in self.slo.percentiles:
            q = c.quantile
            if q is not None and c.metric in ("ttft", "e2e"):
                bounds.append((c.metric, c.threshold_s, 1.0 - q))
        if self.slo.min_attainment is not None:
            bounds.extend(
                (t.metric, t.threshold_s, 1.0 - self.slo.min_attainment)
                for t in self.slo.request_thresholds
                if t.metric in ("ttft", "e2e")
            )
        return bounds


def _count_past(
    records: pl.DataFrame, metric: str, threshold_s: float, now_s: float, success_only: bool
) -> int:
    """Requests past the threshold: successful ones above it, failed ones (unless the SLO
    takes success-only percentiles) and in-flight ones already waiting longer."""
    col = METRIC_COLUMNS[metric]
    ok = records["ok"].fill_null(False) if "ok" in records.columns else pl.Series([True])
    values = records[col].cast(pl.Float64)
    done_late = int(((values > threshold_s) & ok).sum())
    if "ok" in records.columns and not success_only:
        # A failed request misses every threshold (censored ones are not failures).
        failed = records["ok"].not_()
        if "error_class" in records.columns:
            failed = failed & ~records["error_class"].is_in(list(CENSORED_CLASSES)).fill_null(False)
        done_late += int(failed.fill_null(False).sum())
    pending_col = "first_token_s" if metric == "ttft" else "end_s"
    send_col = next((c for c in ("sent_s", *TIME_COLUMNS) if c in records.columns), None)
    if pending_col not in records.columns or send_col is None or "ok" not in records.columns:
        return done_late
    pending = records.filter(pl.col("ok").is_null() & pl.col(pending_col).is_null())
    waiting_late = int((now_s - pending[send_col] > threshold_s).sum())
    return done_late + waiting_late


@dataclass(frozen=True)
class AbandonColumns:
    """What `AbandonRule.hopeless` reads of a level's records, as arrays read once (row i:
    record i), so that `hopeless_rows` judges any subset by numpy selections. Values
    compare as polars compares them: null never, NaN above everything."""

    time: np.ndarray  # schedule time: null -inf, NaN +inf
    ok: np.ndarray  # null: False
    ok_known: np.ndarray  # ok is not null (an outcome)
    failed: np.ndarray  # not ok, not censored
    metric: dict[str, np.ndarray]  # the tail bounds' columns: null -inf, NaN +inf
    pending: dict[str, np.ndarray | None]  # no outcome and no first token / end yet
    send: np.ndarray  # the send time: null +inf, NaN -inf (now - send: null never late)

    @classmethod
    def of(cls, records: pl.DataFrame, rule: AbandonRule) -> AbandonColumns | None:
        """None where `hopeless` must read the frame itself (no `ok`, no schedule time, a
        tail bound's column missing)."""
        cols = records.columns
        time_col = next((c for c in TIME_COLUMNS if c in cols), None)
        metrics = {m for m, _, _ in rule._tail_bounds()}
        if (
            "ok" not in cols
            or time_col is None
            or any(METRIC_COLUMNS[m] not in cols for m in metrics)
        ):
            return None

        def compared(name: str, null: float, nan: float) -> np.ndarray:
            return float_values(records[name], null=null, nan=nan)

        ok_col = records["ok"]
        ok_known = ok_col.is_not_null().to_numpy().astype(bool)
        ok = bool_values(ok_col)
        censored = np.zeros(records.height, dtype=bool)
        if "error_class" in cols:
            censored = bool_values(records["error_class"].is_in(list(CENSORED_CLASSES)))
        send_col = next((c for c in ("sent_s", *TIME_COLUMNS) if c in cols), None)
        send = np.full(records.height, np.inf)
        if send_col is not None:
            send = compared(send_col, np.inf, -np.inf)
        pending: dict[str, np.ndarray | None] = {}
        for m in metrics:
            pending_col = "first_token_s" if m == "ttft" else "end_s"
            pending[m] = None
            if pending_col in cols and send_col is not None:
                waiting = ~ok_known & records[pending_col].is_null().to_numpy().astype(bool)
                pending[m] = waiting
        return cls(
            time=compared(time_col, -np.inf, np.inf),
            ok=ok,
            ok_known=ok_known,
            failed=ok_known & ~ok & ~censored,
            metric={m: compared(METRIC_COLUMNS[m], -np.inf, np.inf) for m in metrics},
            pending=pending,
            send=send,
        )

    @classmethod
    def of_simulated(
        cls, arrival_s: np.ndarray, measured: dict[str, np.ndarray], rule: AbandonRule
    ) -> AbandonColumns | None:
        """`of(simulated_records(...), rule)` read from the arrays themselves: the
        send times and each metric's values (`measured`: ttft, tpot, e2e; NaN: not finished,
        or none). A simulated request has an outcome from the start (ok once finished) and is
        never censored (planner.limit.predict.simulated_records)."""
        metrics = {m for m, _, _ in rule._tail_bounds()}
        if any(m not in measured for m in metrics):
            return None  # no such column: `hopeless` reads the frame, as `of` says
        ok = ~np.isnan(measured["e2e"])
        no_one = np.zeros(arrival_s.size, dtype=bool)
        return cls(
            time=arrival_s,
            ok=ok,
            ok_known=~no_one,
            failed=~ok,
            metric={m: np.where(np.isnan(measured[m]), -np.inf, measured[m]) for m in metrics},
            pending=dict.fromkeys(metrics, no_one),
            send=arrival_s,
        )


class Probe(Protocol):
    """Holds a load level and returns what it measured.

    `load` is req/s (rate) or users (concurrency). A probe may call `abandon.hopeless` with
    its partial records and stop the level early, setting `abandoned` on the measurement.
    """

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement: ...
