"""`capplan plan` end to end: plan.json with every input, the table, clean errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from planner.plan_schema import Plan
from profiles.model import save_profile
from tests.plan_profiles import make_profile

runner = CliRunner()


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "p.json"
    save_profile(make_profile(window_rates_60s=[float(i) / 10 for i in range(101)]), path)
    return path


def test_plan_writes_plan_json(tmp_path: Path) -> None:
    out = tmp_path / "plans" / "q3.json"
    result = runner.invoke(
        app,
        [
            "plan",
            "--profile",
            str(_profile(tmp_path)),
            "--limit",
            "4rps",
            "--growth",
            "1.0,2",
            "--slo",
            "ttft:p95<=2s,tpot:p95<=100ms",
            "--fleet-span",
            "30",
            "--gpu-hour-price",
            "4.25",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema"] == "capplan.plan/1"
    plan = Plan.model_validate(data)
    assert plan.instances == plan.scenarios[0].instances == 4  # ceil(9.9 x 1.2 / 4) + 1
    assert plan.scenarios[1].instances == 7  # ceil(19.8 x 1.2 / 4) + 1
    assert plan.inputs.limit.unit == "rps" and plan.inputs.gpu_hour_price_usd == 4.25
    assert plan.checks.fleet is not None and len(plan.checks.fleet.points) == 6
    assert "Instances per growth scenario" in result.output


def test_bad_limit_exits_2(tmp_path: Path) -> None:
    for bad in ("17.4", "0rps", "-2users"):
        result = runner.invoke(
            app,
            [
                "plan",
                "--profile",
                str(_profile(tmp_path)),
                "--limit",
                bad,
                "-o",
                str(tmp_path / "x.json"),
            ],
        )
        assert result.exit_code == 2, result.output
        assert "error:" in result.output
        assert "Traceback" not in result.output


def test_missing_profile_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "plan",
            "--profile",
            str(tmp_path / "none.json"),
            "--limit",
            "4rps",
            "-o",
            str(tmp_path / "x.json"),
        ],
    )
    assert result.exit_code == 2
    assert "profile not found" in result.output
