"""Stage summaries from records, recovery time, reading runs with unmerged parts, CLI errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.recovery import recovery_curve
from contracts.run import RECORD_COLUMNS, Stage, StagePlan
from contracts.rundir import read_records
from locustfiles.recorder import RECORD_NAMES, RECORDS_PARTS, PartWriter
from locustfiles.summary import summarize_stage
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile

STAGE = Stage(name="s", duration_s=10.0, rate_rps=2.0)


def _row(
    i: int,
    t: float,
    *,
    ttft: float = 0.1,
    ok: bool = True,
    err: str | None = None,
    out: int = 11,
    status: int | None = None,
    message: str | None = None,
) -> tuple[Any, ...]:
    e2e = ttft + 0.01 * (out - 1)
    values = {
        "stage": "s",
        "request_id": f"s/{i}",
        "intended_send_s": t,
        "sent_s": t + 0.001,
        "first_token_s": t + 0.001 + ttft if ok else None,
        "end_s": t + 0.001 + e2e,
        "schedule_lag_s": 0.001,
        "ttft_s": ttft if ok else None,
        "tpot_s": 0.01 if ok else None,
        "itl_mean_s": 0.01 if ok else None,
        "itl_max_s": 0.01 if ok else None,
        "e2e_s": e2e if ok else None,
        "input_tokens": 5,
        "output_tokens": out if ok else None,
        "tokens_estimated": False,
        "ok": ok,
        "status_code": status if status is not None else (200 if ok else 0),
        "error_class": err,
        "error_message": message,
        "itl_gaps_s": [0.01] * (out - 1) if ok else [],
    }
    return tuple(values[c] for c in RECORD_NAMES)


def _frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame([list(r) for r in rows], schema=RECORD_COLUMNS, orient="row")


def test_summary_counts_rates_and_percentiles() -> None:
    rows = [_row(i, 0.5 * i, ttft=0.1 + 0.01 * i) for i in range(18)]
    rows += [_row(18, 9.0, ok=False, err="timeout"), _row(19, 9.5, ok=False, err="connect_refused")]
    s = summarize_stage(_frame(rows), STAGE, 0.0, 10.0)
    assert (s.scheduled, s.completed, s.errors) == (20, 18, 2)
    assert s.errors_by_class == {"connect_refused": 1, "timeout": 1}
    assert s.offered_rps == 2.0 and s.achieved_rps == 1.8
    assert s.output_tokens_per_s == pytest.approx(18 * 11 / 10)
    assert s.ttft_s.p50 == pytest.approx(0.185)
    assert s.tpot_s.p50 == pytest.approx(0.01) and s.itl_s.count == 180
    assert s.schedule_lag_s.p99 == pytest.approx(0.001)
    assert s.ttft_from_intended_s.p50 == pytest.approx(0.186)
    # Busy time: 18 ok requests of e2e 0.2 + 0.01 i, two failures of 0.2 s, over 10 s.
    assert s.mean_in_flight == pytest.approx((18 * 0.2 + 0.01 * 153 + 0.4) / 10)


def test_summary_names_each_class_by_its_most_frequent_message() -> None:
    rows = [_row(i, 0.5 * i) for i in range(10)]
    rows += [
        _row(10, 5.0, ok=False, err="refused", status=429, message="too many requests waiting"),
        _row(11, 5.5, ok=False, err="refused", status=503, message="unavailable"),
        _row(12, 6.0, ok=False, err="refused", status=429, message="too many requests waiting"),
        _row(13, 6.5, ok=False, err="server_error", status=500, message="internal error"),
        _row(14, 7.0, ok=False, err="disconnect", status=200),  # no message
    ]
    s = summarize_stage(_frame(rows), STAGE, 0.0, 10.0)
    assert s.errors_by_class == {"disconnect": 1, "refused": 3, "server_error": 1}
    assert s.error_messages == {
        "refused": "too many requests waiting",
        "server_error": "internal error",
    }


def test_records_of_an_older_run_read_with_null_messages(tmp_path: Path) -> None:
    _frame([_row(0, 0.0), _row(1, 0.5, ok=False, err="timeout")]).drop(
        "error_message"
    ).write_parquet(tmp_path / "records.parquet")
    df = read_records(tmp_path)
    assert list(df.columns) == list(RECORD_COLUMNS)
    assert df["error_message"].to_list() == [None, None]


def test_recovery_time_from_burst_end() -> None:
    # Slow for the first 4 s after the burst (at t=100), fast afterwards.
    rows = [_row(i, 100 + 0.1 * i, ttft=2.0 if i < 40 else 0.1) for i in range(200)]
    df = _frame(rows).with_columns(pl.lit("rec").alias("stage"))
    curve = recovery_curve(df, 90.0, 100.0, 120.0, threshold_s=0.5)
    t = curve.recovery_s
    # The 10 s window must slide past the slow requests: recovered at ~100 + 4 + 10.
    assert t is not None and 13.5 <= t <= 14.5
    assert recovery_curve(df, 90.0, 100.0, 110.0, threshold_s=0.5).recovery_s is None
    # The stored curve is the one the recovery is read on: under the line from then on.
    at = curve.t_s.index(100.0 + t)
    assert curve.ttft_p95_s[at] is not None and curve.ttft_p95_s[at] <= 0.5
    assert all(
        y is None or y > 0.5
        for x, y in zip(curve.t_s, curve.ttft_p95_s, strict=True)
        if x < 100 + t
    )
    rec = Stage(name="rec", role="recovery", duration_s=20.0, rate_rps=10.0)
    s = summarize_stage(df, rec, 100.0, 120.0, baseline_ttft_p95_s=0.2, burst=(90.0, 100.0))
    assert s.recovered is True and s.recovery_s == t
    assert s.recovery_curve is not None and s.recovery_curve.recovery_s == t


def test_failed_requests_keep_the_rolling_p95_up() -> None:
    # After the burst every request is refused for 5 s: failures count as +inf, so the
    # curve cannot show recovery while they are in its window (fast failures are not fast).
    rows = [
        _row(i, 100 + 0.1 * i, ttft=0.05, ok=i >= 50, err=None if i >= 50 else "refused")
        for i in range(200)
    ]
    df = _frame(rows)
    curve = recovery_curve(df, 95.0, 100.0, 120.0, threshold_s=0.5)
    assert curve.recovery_s is not None and curve.recovery_s >= 14.0
    assert float("inf") in curve.ttft_p95_s


def test_read_records_includes_unmerged_parts(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path / RECORDS_PARTS, RECORD_COLUMNS)
    writer.write([_row(0, 0.0), _row(1, 0.5)])
    writer.write([_row(2, 1.0, ok=False, err="cancelled")])
    df = read_records(tmp_path)
    assert df.height == 3 and list(df.columns) == list(RECORD_COLUMNS)
    assert df["error_class"].to_list() == [None, None, "cancelled"]


def test_cli_bad_plan_is_exit_2_without_traceback(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("stages:\n  - {name: a, duration_s: 1, rate_rps: 1, arrival: sometimes}\n")
    from testkit.profiles import make_profile

    prof = tmp_path / "p.json"
    prof.write_text(make_profile([(10, 2)]).to_json())
    result = CliRunner().invoke(
        app,
        [
            "loadtest",
            "--host",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--profile",
            str(prof),
            "--stage-plan",
            str(plan),
            "-o",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 2
    assert "stages[0].arrival" in result.output and "Traceback" not in result.output


def test_missing_api_key_variable_is_a_config_error(tmp_path: Path) -> None:
    from contracts.errors import ConfigError

    plan = StagePlan(stages=[Stage(name="s", duration_s=1.0, rate_rps=1.0)])
    prof = tmp_path / "p.json"
    prof.write_text(make_profile([(8, 2)]).to_json())
    cfg = LoadTestConfig(
        host="http://127.0.0.1:9",
        model="m",
        profile_path=str(prof),
        api_key_env="CAPPLAN_NO_SUCH_KEY",
    )
    with pytest.raises(ConfigError, match="CAPPLAN_NO_SUCH_KEY"):
        run_loadtest(cfg, plan, tmp_path / "run")


def test_summary_of_a_frame_without_the_extra_columns() -> None:
    rows = [_row(i, 0.5 * i) for i in range(10)]
    s = summarize_stage(_frame(rows).drop("itl_gaps_s"), STAGE, 0.0, 10.0)
    assert s.completed == 10 and s.itl_s.count == 10 and s.itl_s.p50 == pytest.approx(0.01)
