"""Live per-stage numbers of a running plan, from capplan's own records, for the web UI tab.

`LiveStats` keeps, per stage, the few columns of each finished request that the tab needs
(compact arrays, appended as rows arrive); `snapshot` turns them into a `LiveView`: for each
stage the cumulative numbers and those of the requests that finished in the last 10 s, with
TTFT, TPOT and ITL percentiles over the successful requests (the same `percentiles` and
definitions as stages.json), goodput, errors by class and schedule lag. No SLO verdicts:
goodput counts the requests within the per-request thresholds given (--llm-slo-ttft,
--llm-slo-tpot), or every successful one when none is given.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from contracts.run import Percentiles, StageKind, StagePlan
from contracts.rundir import RECORD_NAMES
from locustfiles.summary import percentiles

WINDOW_S = 10.0

_I = {name: RECORD_NAMES.index(name) for name in RECORD_NAMES}


@dataclass(frozen=True)
class GoodThresholds:
    """Per-request bounds of a good request (inclusive); None: no bound on that metric."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def is_good(self, ok: bool, ttft_s: float | None, tpot_s: float | None) -> bool:
        if not ok:
            return False
        if self.ttft_s is not None and (ttft_s is None or ttft_s > self.ttft_s):
            return False
        # A one-token answer has no TPOT and meets any TPOT bound (as vLLM counts it).
        return self.tpot_s is None or tpot_s is None or tpot_s <= self.tpot_s


def _np(values: array[Any], dtype: Any) -> np.ndarray:
    """A view of a column (no copy); frombuffer refuses an empty buffer."""
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _f(value: Any) -> float:
    return math.nan if value is None else float(value)


@dataclass
class _StageColumns:
    end_s: array[float] = field(default_factory=lambda: array("d"))
    ok: array[int] = field(default_factory=lambda: array("b"))
    good: array[int] = field(default_factory=lambda: array("b"))
    ttft_s: array[float] = field(default_factory=lambda: array("d"))
    tpot_s: array[float] = field(default_factory=lambda: array("d"))
    lag_s: array[float] = field(default_factory=lambda: array("d"))
    gap_counts: array[int] = field(default_factory=lambda: array("q"))
    gaps_s: array[float] = field(default_factory=lambda: array("d"))
    error_class: list[str] = field(default_factory=list)


class LiveWindow(BaseModel):
    """The requests of one stage that finished in a window (the last 10 s, or the stage so far)."""

    model_config = ConfigDict(extra="forbid")

    span_s: float = Field(description="seconds the window covers")
    finished: int = Field(description="requests of the stage that finished in the window")
    completed: int = Field(description="of them, successful")
    errors: int
    errors_by_class: dict[str, int]
    achieved_rps: float = Field(description="completed / span")
    goodput_rps: float = Field(description="good requests / span")
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    schedule_lag_s: Percentiles


class LiveStage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: StageKind
    target_rate_rps: float | None
    target_users: int | None
    start_s: float = Field(description="planned start, seconds since run start")
    end_s: float = Field(description="planned end")
    state: Literal["pending", "running", "done"]
    current: LiveWindow = Field(description="requests that finished in the last 10 s")
    cumulative: LiveWindow = Field(description="every request of the stage finished so far")


class LiveView(BaseModel):
    """What the capplan tab and /capplan/live show."""

    model_config = ConfigDict(extra="forbid")

    run_dir: str
    t_s: float = Field(description="now, seconds since run start")
    elapsed_s: float = Field(description="seconds since the plan started")
    stage: str = Field(description="the stage running now ('drain' after the last)")
    scheduled: int
    in_flight: int
    goodput_ttft_s: float | None = Field(description="TTFT bound of a good request")
    goodput_tpot_s: float | None = Field(description="TPOT bound of a good request")
    done: bool = False
    stages: list[LiveStage]


class LiveStats:
    """Per-stage columns of finished requests, added row by row (RECORD_COLUMNS order)."""

    def __init__(self, thresholds: GoodThresholds) -> None:
        self.thresholds = thresholds
        self._stages: dict[str, _StageColumns] = {}

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        for r in rows:
            cols = self._stages.setdefault(str(r[_I["stage"]]), _StageColumns())
            ok = bool(r[_I["ok"]])
            ttft, tpot = r[_I["ttft_s"]], r[_I["tpot_s"]]
            cols.end_s.append(_f(r[_I["end_s"]]))
            cols.ok.append(ok)
            cols.good.append(self.thresholds.is_good(ok, ttft, tpot))
            cols.ttft_s.append(_f(ttft) if ok else math.nan)
            cols.tpot_s.append(_f(tpot) if ok else math.nan)
            cols.lag_s.append(_f(r[_I["schedule_lag_s"]]))
            gaps = (r[_I["itl_gaps_s"]] or []) if ok else []
            cols.gap_counts.append(len(gaps))
            cols.gaps_s.extend(float(g) for g in gaps)
            cols.error_class.append("" if ok else str(r[_I["error_class"]] or "error"))

    def window(self, stage: str, lo_s: float, hi_s: float, span_s: float) -> LiveWindow:
        """The stage's requests that finished in [lo_s, hi_s], rates over `span_s` seconds."""
        cols = self._stages.get(stage, _StageColumns())
        end = _np(cols.end_s, float)
        mask = (end >= lo_s) & (end <= hi_s)
        ok = _np(cols.ok, np.int8).astype(bool)
        good = _np(cols.good, np.int8).astype(bool)
        ok_in = mask & ok
        gaps = _np(cols.gaps_s, float)[np.repeat(ok_in, _np(cols.gap_counts, np.int64))]
        errors = Counter(c for c, m in zip(cols.error_class, mask, strict=True) if m and c)
        span = max(span_s, 1e-9)
        return LiveWindow(
            span_s=span_s,
            finished=int(mask.sum()),
            completed=int(ok_in.sum()),
            errors=int((mask & ~ok).sum()),
            errors_by_class=dict(sorted(errors.items())),
            achieved_rps=float(ok_in.sum()) / span,
            goodput_rps=float((mask & good).sum()) / span,
            ttft_s=percentiles(_np(cols.ttft_s, float)[ok_in]),
            tpot_s=percentiles(_np(cols.tpot_s, float)[ok_in]),
            itl_s=percentiles(gaps),
            schedule_lag_s=percentiles(_np(cols.lag_s, float)[mask]),
        )

    def stages(self, plan: StagePlan, plan_start_s: float, now_s: float) -> list[LiveStage]:
        """Every stage of `plan` (started at `plan_start_s`) as seen at `now_s`."""
        out: list[LiveStage] = []
        t = plan_start_s
        for stage in plan.stages:
            end = t + stage.duration_s
            state: Literal["pending", "running", "done"] = (
                "pending" if now_s < t else "running" if now_s < end else "done"
            )
            so_far = max(0.0, min(now_s, end) - t)
            current_span = min(WINDOW_S, max(0.0, now_s - t))
            out.append(
                LiveStage(
                    name=stage.name,
                    kind=stage.kind,
                    target_rate_rps=stage.rate_rps,
                    target_users=stage.users,
                    start_s=t,
                    end_s=end,
                    state=state,
                    current=self.window(stage.name, now_s - WINDOW_S, now_s, current_span),
                    cumulative=self.window(stage.name, -math.inf, math.inf, so_far),
                )
            )
            t = end
        return out


# --- the web UI tab -----------------------------------------------------------------------------

TAB_KEY = "capplan"
JSON_PATH = "/capplan/live"

_COLUMNS: list[tuple[str, str]] = [
    ("stage", "Stage"),
    ("window", "Window"),
    ("finished", "Finished"),
    ("errors", "Errors by class"),
    ("achieved_rps", "Achieved req/s"),
    ("goodput_rps", "Goodput req/s"),
    ("ttft_ms", "TTFT p50 / p95 / p99 ms"),
    ("tpot_ms", "TPOT p50 / p95 / p99 ms"),
    ("itl_ms", "ITL p50 / p95 / p99 ms"),
    ("lag_ms", "Schedule lag p50 / p99 ms"),
]


def _ms(p: Percentiles, stats: tuple[str, ...] = ("p50", "p95", "p99")) -> str:
    values = [getattr(p, s) for s in stats]
    return " / ".join("-" if v is None else f"{v * 1000:.1f}" for v in values)


def table_rows(view: LiveView) -> list[dict[str, Any]]:
    """The tab's rows: the run directory, then each started stage's current and cumulative."""
    blank = {key: "" for key, _ in _COLUMNS}
    rows: list[dict[str, Any]] = [
        {**blank, "stage": "run directory", "window": view.run_dir},
        {**blank, "stage": "now", "window": f"{view.stage} t={view.elapsed_s:.0f}s",
         "finished": f"{view.scheduled} sent, {view.in_flight} in flight"},
    ]  # fmt: skip
    for stage in view.stages:
        if stage.state == "pending":
            continue
        for label, w in (("last 10 s", stage.current), ("stage", stage.cumulative)):
            errors = ", ".join(f"{k} {n}" for k, n in w.errors_by_class.items())
            rows.append(
                {
                    "stage": f"{stage.name} ({stage.state})",
                    "window": label,
                    "finished": w.finished,
                    "errors": errors or "0",
                    "achieved_rps": round(w.achieved_rps, 2),
                    "goodput_rps": round(w.goodput_rps, 2),
                    "ttft_ms": _ms(w.ttft_s),
                    "tpot_ms": _ms(w.tpot_s),
                    "itl_ms": _ms(w.itl_s),
                    "lag_ms": _ms(w.schedule_lag_s, ("p50", "p99")),
                }
            )
    return rows


def install_web_ui(web_ui: Any, view: Any) -> None:
    """Add the capplan tab and the JSON endpoint to Locust's web UI.

    `view()` returns the current LiveView, or None before a test starts. The tab uses
    Locust's extension points: `extendedTabs` / `extendedTables` in the template arguments
    and `extended_stats` added to each /stats/requests answer, which the UI polls.
    """
    import json

    from flask import Response, request

    web_ui.template_args["extendedTabs"] = [{"title": "capplan", "key": TAB_KEY}]
    web_ui.template_args["extendedTables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in _COLUMNS]}
    ]

    @web_ui.app.route(JSON_PATH)
    def capplan_live() -> Response:
        current = view()
        body = "null" if current is None else current.model_dump_json()
        return Response(body, mimetype="application/json")

    @web_ui.app.after_request
    def add_capplan_rows(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or response.status_code != 200:
            return response
        current = view()
        data = json.loads(response.get_data())
        rows = table_rows(current) if current is not None else []
        data["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
        response.set_data(json.dumps(data))
        return response
