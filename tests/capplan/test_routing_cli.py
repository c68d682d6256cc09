"""`capplan plan --routing`: each router's count and prefix-hit ratio in plan.json, the
table, and clean errors (exit 2) for an unknown router or a bad threshold."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from profiles.model import load_profile

runner = CliRunner()
PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets"


def _plan(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    out = tmp_path / "plan.json"
    args = ["plan", "--profile", str(PRESETS / "agent.json"), "--limit", "4rps"]
    args += ["--slo", "ttft:p95<=2s", "--fleet-span", "60", "-o", str(out), *extra]
    result = runner.invoke(app, args)
    return result.exit_code, result.output, out


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--routing", "round_robin,cache"], "unknown routing 'cache'; known: round_robin"),
        (["--routing", ","], "--routing needs router names"),
        (["--routing", "prefix_aware", "--prefix-threshold", "1.5"], "--prefix-threshold"),
        (["--routing", "prefix_aware", "--prefix-threshold", "0"], "--prefix-threshold"),
    ],
)
def test_bad_routing_options_exit_2_with_what_was_expected(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    code, output, out = _plan(tmp_path, *extra)
    assert code == 2, output
    assert said in output and "Traceback" not in output
    assert not out.exists()


def test_plan_counts_instances_per_router_on_the_agent_preset(tmp_path: Path) -> None:
    code, output, out = _plan(tmp_path, "--routing", "prefix_aware,round_robin")
    assert code == 0, output
    assert "Instances by router" in output and "prefix_aware (assumed)" in output
    fleet = Plan.model_validate_json(out.read_text(encoding="utf-8")).checks.fleet
    assert fleet is not None and fleet.assumed_routing == "prefix_aware"
    ideal = load_profile(PRESETS / "agent.json").prefix.ideal_hit_ratio
    assert fleet.ideal_prefix_hit_ratio == ideal
    by = {r.routing: r for r in fleet.routers}
    assert list(by) == ["prefix_aware", "round_robin"]
    assert all(r.min_instances_meeting is not None for r in by.values())
    prefix, rr = by["prefix_aware"].prefix_hit_ratio, by["round_robin"].prefix_hit_ratio
    assert prefix is not None and rr is not None and ideal is not None
    # Sessions stay on one cache under the prefix router; round-robin splits them.
    assert rr < prefix <= ideal
    assert {p.routing for p in fleet.points} == {"prefix_aware", "round_robin"}
