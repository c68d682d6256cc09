"""`capplan whatif --routing`: the routers compared on the cheapest candidate's fleet, and
clean errors (exit 2) for a bad router or threshold before anything is simulated."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.whatif import WhatifCandidate
from planner.capacity.arithmetic import build_demand
from planner.engine import build_engine_config
from planner.slo.spec import parse_slo
from planner.whatif.options import WhatifOptions
from planner.whatif.routing import compare_routing
from profiles.model import load_profile

AGENT = Path(__file__).resolve().parents[3] / "profiles" / "presets" / "agent.json"


def _candidate(label: str, rank: int | None, instances: int | None) -> WhatifCandidate:
    return WhatifCandidate(
        label=label, gpu="H100-80GB", tp=1, settings={}, rank=rank, instances=instances
    )


def test_the_cheapest_candidates_fleet_is_compared_under_each_router() -> None:
    profile = load_profile(AGENT)
    options = WhatifOptions(
        profile_path=str(AGENT),
        slo=parse_slo("ttft:p95<=2s"),
        routings=("session_affinity", "round_robin"),
        routing_span_s=60.0,
    )
    config = build_engine_config("H100-80GB", "llama-3.1-8b")
    candidates = [
        _candidate("dear", 2, 9),
        _candidate("cheap", 1, 2),
        _candidate("none", None, None),
    ]
    configs = {"dear": config, "cheap": config}
    compared = compare_routing(profile, options, candidates, configs, build_demand(profile))
    assert compared is not None
    label, check = compared
    assert label == "cheap" and check.assumed_routing == "session_affinity"
    assert {p.instances for p in check.points} >= {1, 2, 3}
    by = {r.routing: r for r in check.routers}
    sticky, rr = by["session_affinity"].prefix_hit_ratio, by["round_robin"].prefix_hit_ratio
    assert sticky is not None and rr is not None and sticky > rr
    plain = WhatifOptions(profile_path=str(AGENT), slo=parse_slo("ttft:p95<=2s"))
    assert compare_routing(profile, plain, candidates, configs, build_demand(profile)) is None


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--routing", "nearest"], "unknown routing 'nearest'; known: round_robin"),
        (["--routing", "all", "--prefix-threshold", "2"], "--prefix-threshold"),
    ],
)
def test_bad_routing_options_exit_2(tmp_path: Path, extra: list[str], said: str) -> None:
    out = tmp_path / "w.json"
    args = ["whatif", "--profile", str(AGENT), "--slo", "ttft:p95<=2s", "-o", str(out), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output
    assert not out.exists()
