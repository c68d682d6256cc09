"""Live per-stage numbers from rows: windows, percentiles, goodput, errors by class."""

from __future__ import annotations

from typing import Any

from contracts.run import Stage, StagePlan
from locustfiles.live import GoodThresholds, LiveStats, LiveView, table_rows
from locustfiles.recorder import RECORD_NAMES

PLAN = StagePlan(
    stages=[
        Stage(name="a", duration_s=20.0, rate_rps=1.0),
        Stage(name="b", kind="closed", duration_s=20.0, users=2),
    ]
)


def _row(stage: str, end_s: float, ttft_s: float | None, *, ok: bool = True, **kw: Any) -> tuple:
    values: dict[str, Any] = dict.fromkeys(RECORD_NAMES)
    values.update(
        stage=stage,
        end_s=end_s,
        ttft_s=ttft_s,
        tpot_s=kw.get("tpot_s", 0.02 if ok else None),
        schedule_lag_s=kw.get("lag_s", 0.001),
        ok=ok,
        error_class=kw.get("error_class"),
        itl_gaps_s=kw.get("gaps", [0.02, 0.02] if ok else None),
    )
    return tuple(values[n] for n in RECORD_NAMES)


def test_cumulative_and_last_10_s_windows() -> None:
    live = LiveStats(GoodThresholds())
    # stage a: ten successes finishing at t = 1..10 with TTFT 0.1 .. 1.0 s
    live.add([_row("a", float(t), t / 10) for t in range(1, 11)])
    live.add([_row("a", 12.0, None, ok=False, error_class="http_500")])
    live.add([_row("a", 15.0, None, ok=False, error_class="timeout")])
    a, b = live.stages(PLAN, 0.0, now_s=16.0)
    assert (a.state, b.state) == ("running", "pending")
    cum = a.cumulative
    assert (cum.finished, cum.completed, cum.errors) == (12, 10, 2)
    assert cum.errors_by_class == {"http_500": 1, "timeout": 1}
    assert cum.ttft_s.p50 is not None and abs(cum.ttft_s.p50 - 0.55) < 1e-9
    assert cum.ttft_s.max == 1.0 and cum.itl_s.count == 20
    assert abs(cum.achieved_rps - 10 / 16) < 1e-9  # the stage so far: 16 s of 20
    cur = a.current  # finished in [6, 16]: t = 6..10 and both errors
    assert (cur.finished, cur.completed, cur.errors) == (7, 5, 2)
    assert cur.ttft_s.p50 is not None and abs(cur.ttft_s.p50 - 0.8) < 1e-9
    assert abs(cur.achieved_rps - 5 / 10) < 1e-9
    assert b.cumulative.finished == 0 and b.cumulative.ttft_s.p50 is None


def test_goodput_counts_requests_within_the_thresholds() -> None:
    live = LiveStats(GoodThresholds(ttft_s=0.5, tpot_s=0.05))
    live.add(
        [
            _row("b", 21.0, 0.5),  # at the bound: good (inclusive)
            _row("b", 22.0, 0.6),  # TTFT too slow
            _row("b", 23.0, 0.1, tpot_s=0.06),  # TPOT too slow
            _row("b", 24.0, 0.1, tpot_s=None),  # one token: no TPOT, meets it
            _row("b", 25.0, None, ok=False, error_class="timeout"),
        ]
    )
    _, b = live.stages(PLAN, 0.0, now_s=30.0)
    assert b.state == "running"
    assert abs(b.cumulative.goodput_rps - 2 / 10) < 1e-9
    assert abs(b.cumulative.achieved_rps - 4 / 10) < 1e-9


def test_table_rows_show_the_run_directory_and_each_started_stage() -> None:
    live = LiveStats(GoodThresholds())
    live.add([_row("a", 1.0, 0.25)])
    view = LiveView(
        run_dir="/runs/x",
        t_s=5.0,
        elapsed_s=5.0,
        stage="a",
        scheduled=2,
        in_flight=1,
        goodput_ttft_s=None,
        goodput_tpot_s=None,
        stages=live.stages(PLAN, 0.0, now_s=5.0),
    )
    rows = table_rows(view)
    assert rows[0]["window"] == "/runs/x"
    assert [r["window"] for r in rows[2:]] == ["last 10 s", "stage"]  # b is pending
    assert rows[3]["ttft_ms"] == "250.0 / 250.0 / 250.0"
