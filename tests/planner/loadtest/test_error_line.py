"""What a load test's end says about its errors: requests still in flight when their stage
ended ("cancelled") are not failures, as the limit search and the report count them; the
console line and --max-errors counted them as failures (a bug hunt: "193 of 901 requests
failed (cancelled: 193): more than --max-errors 0.01", exit 3)."""

from __future__ import annotations

from contracts.run import StageSummary
from planner.loadtest.preflight import error_line, failed_run
from testkit.report_inputs import build_run


def _stage(completed: int, errors: dict[str, int]) -> StageSummary:
    stage = build_run()[1][0]
    return stage.model_copy(
        update={
            "scheduled": completed + sum(errors.values()),
            "completed": completed,
            "errors": sum(errors.values()),
            "errors_by_class": errors,
        }
    )


def test_cancelled_requests_are_not_failures() -> None:
    cancelled = [_stage(708, {"cancelled": 193})]
    assert failed_run(cancelled, 0.01) is None
    assert error_line(cancelled) == (
        "193 of 901 still in flight when their stage ended (cancelled, not failures)"
    )
    both = [_stage(700, {"cancelled": 193, "server_error": 8})]
    failed = failed_run(both, 0.005)  # 8 failures, more than 0.5 % of 901
    assert failed is not None and "8 of 901 requests failed (server_error: 8)" in str(failed)
    assert failed_run(both, 0.01) is None  # 8 within 1 % of 901 (the 193 cancelled are not)
    assert error_line([_stage(10, {})]) is None
