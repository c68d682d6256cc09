"""The plan the ops tests read: a 9 req/s peak, 4 req/s per instance, 20 % headroom, N+1,
`ttft:p95<=2s,tpot:p95<=0.1s`; by hand, 4 instances of which 3 serve: 12 req/s of capacity,
10 req/s sized for."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from profiles.model import save_profile
from profiles.presets import preset_profile

SLO = "ttft:p95<=2s,tpot:p95<=0.1s"


def plan_chat(folder: Path, out: Path, *options: str) -> tuple[Plan, str]:
    """`capplan plan` on the chat preset at 5 req/s with `options` (no fleet check), written
    to `out`: the plan and what the command printed (it must exit 0)."""
    profile = folder / "chat.json"
    save_profile(preset_profile("chat", rate_rps=5.0), profile)
    result = CliRunner().invoke(
        app, ["plan", "--profile", str(profile), *options, "--no-fleet-check", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return Plan.model_validate_json(out.read_text()), result.output


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, Path]:
    folder = tmp_path_factory.mktemp("ops")
    out = folder / "plan.json"
    plan, _ = plan_chat(folder, out, "--limit", "4rps", "--peak-rps", "9", "--slo", SLO,
                        "--headroom", "0.2", "--redundancy", "1")  # fmt: skip
    return plan, out
