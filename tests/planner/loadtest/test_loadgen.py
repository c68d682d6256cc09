"""`--workers auto`: the per-process capacity cache and the worker count for a plan's peak."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError, InputError
from contracts.run import Stage, StagePlan
from planner.loadtest.workers import (
    ESTIMATED_PROCESS_RPS,
    ProcessCapacity,
    choose_workers,
    load_capacity,
    parse_workers,
    plan_peak_rps,
    save_capacity,
)

CAP = ProcessCapacity(rate_rps=400.0, cpus=8, source="test")


def test_one_process_while_the_peak_fits() -> None:
    assert choose_workers(400.0, CAP, cpus=8).workers == 0
    assert choose_workers(None, CAP, cpus=8).workers == 0


def test_enough_workers_that_each_share_fits() -> None:
    choice = choose_workers(401.0, CAP, cpus=8)
    assert choice.workers == 2 and "2 local workers" in choice.reason
    assert choose_workers(1200.0, CAP, cpus=8).workers == 3
    assert choose_workers(1201.0, CAP, cpus=8).workers == 4


def test_at_most_one_worker_per_cpu_and_it_says_so() -> None:
    choice = choose_workers(4000.0, CAP, cpus=4)
    assert choice.workers == 4
    assert "needs 10 processes" in choice.reason and "4 CPUs" in choice.reason


def test_peak_is_the_highest_open_stage_rate() -> None:
    plan = StagePlan(
        stages=[
            Stage(name="a", duration_s=1, rate_rps=5),
            Stage(name="b", role="burst", duration_s=1, rate_rps=40, arrival="gamma:0.5"),
            Stage(name="c", kind="closed", duration_s=1, users=500),
        ]
    )
    assert plan_peak_rps(plan) == 40
    closed = StagePlan(stages=[Stage(name="c", kind="closed", duration_s=1, users=5)])
    assert plan_peak_rps(closed) is None


def test_parse_workers() -> None:
    assert parse_workers("auto") is None and parse_workers("AUTO") is None
    assert parse_workers("0") == 0 and parse_workers("3") == 3
    for bad in ("-1", "two", ""):
        with pytest.raises(ConfigError, match="'auto'"):
            parse_workers(bad)


def test_cache_round_trip_and_estimate_without_one(tmp_path: Path) -> None:
    path = tmp_path / "capplan" / "loadgen_capacity.json"
    estimate = load_capacity(path)
    assert estimate.rate_rps == ESTIMATED_PROCESS_RPS and "estimate" in estimate.source
    save_capacity(CAP, path)
    assert load_capacity(path) == CAP
    path.write_text('{"schema": "capplan.loadgen_capacity/1", "rate_rps": -1}')
    with pytest.raises(InputError, match=str(path)):
        load_capacity(path)


def test_cli_bad_workers_is_exit_2_naming_the_choices() -> None:
    from typer.testing import CliRunner

    from capplan.cli import app

    for command in ("loadtest", "limit"):
        args = [command, "--host", "http://127.0.0.1:9", "--model", "m", "-o", "x"]
        if command == "limit":
            args += ["--slo", "ttft:p95<=1s"]
        result = CliRunner().invoke(app, [*args, "--workers", "many"])
        assert result.exit_code == 2, result.output
        assert "'auto'" in result.output and "Traceback" not in result.output
