"""Goodput and SLO attainment per stage (stages.json), judged with planner.slo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.run import RECORD_COLUMNS, Stage, StagePlan
from locustfiles.summary import summarize_plan
from planner.loadtest.run import judge_stages
from planner.slo.spec import parse_slo

PLAN = StagePlan(
    stages=[
        Stage(name="a", duration_s=5.0, rate_rps=2.0),
        Stage(name="b", duration_s=5.0, rate_rps=2.0),
    ]
)


def _request(i: int, ttft_s: float | None, *, error: str | None = None) -> dict[str, Any]:
    send = 0.5 * i
    ok = error is None
    return {
        **dict.fromkeys(RECORD_COLUMNS),
        "stage": "a",
        "request_id": f"a/{i}",
        "intended_send_s": send,
        "sent_s": send,
        "schedule_lag_s": 0.0,
        "first_token_s": send + ttft_s if ttft_s is not None else None,
        "end_s": send + 1.0,
        "ttft_s": ttft_s,
        "e2e_s": 1.0 if ok else None,
        "output_tokens": 10 if ok else None,
        "tokens_estimated": False,
        "ok": ok,
        "error_class": error,
    }


def _records() -> pl.DataFrame:
    # stage a: 6 fast, 2 slow, 1 refused, 1 still running at the end (censored at 1.0 s)
    rows = [_request(i, 0.1) for i in range(6)]
    rows += [_request(6, 0.5), _request(7, 0.5)]
    rows += [_request(8, None, error="refused"), _request(9, None, error="cancelled")]
    return pl.DataFrame(rows, schema=RECORD_COLUMNS)


def test_attainment_slo_counts_good_requests_over_every_scheduled_one() -> None:
    records = _records()
    stages = summarize_plan(records, PLAN, 0.0)
    a, b = judge_stages(records, stages, parse_slo("attainment>=90%:ttft<=200ms"))
    assert a.slo == "attainment>=90%:ttft<=200ms"
    assert a.attainment == pytest.approx(6 / 10)
    assert a.goodput_rps == pytest.approx(6 / 5.0)
    # a stage with no request: no attainment, no goodput
    assert b.scheduled == 0 and b.attainment is None and b.goodput_rps == 0.0
    # everything else of the summary is kept
    assert a.model_copy(update={"slo": None, "attainment": None, "goodput_rps": None}) == stages[0]


def test_percentile_slo_judges_each_request_by_its_thresholds() -> None:
    # ttft:p95<=1s also bounds each request: the slow ones (0.5 s) are within, and so is the
    # one still running (its age, 1.0 s, is within: thresholds are inclusive); the refused
    # one is not. Goodput counts only what finished within it: not the one still running.
    records = _records()
    (a, _) = judge_stages(records, summarize_plan(records, PLAN, 0.0), parse_slo("ttft:p95<=1s"))
    assert a.attainment == pytest.approx(9 / 10) and a.goodput_rps == pytest.approx(8 / 5.0)


def test_a_bad_slo_is_a_clear_error_before_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["loadtest", "--host", "http://127.0.0.1:9", "--model", "m", "--workers", "0"]
    args += ["--rate", "1", "--duration", "1", "--slo", "ttft:p95<=2 seconds", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "ttft:p95<=2 seconds" in result.output and "Traceback" not in result.output
    assert not out.exists()
