"""A report of a plan whose limit was given as a number (plan --limit 17.4rps), with no load
test: it renders from --profile, --plan and --verify alone, says the limit was given, leaves
the load-test and limit pages out, and page 1's burst risk is the verify run's burst."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from contracts.verify import Figures, Phase
from testkit.report_inputs import write_fixture
from tests.reports.test_verify_page import _text, _verify

runner = CliRunner()


def _given(root: Path) -> tuple[Path, Path, list[str]]:
    """The fixture's plan with its limit given as a number, and a verify.json of it at N
    whose 30 s burst held and recovered in 14 s."""
    paths = write_fixture(root)
    plan = Plan.model_validate_json(paths.plan.read_text())
    limit = plan.inputs.limit.model_copy(update={"source": "17.4rps"})
    inputs = plan.inputs.model_copy(update={"limit": limit})
    paths.plan.write_text(plan.model_copy(update={"inputs": inputs}).model_dump_json(by_alias=True))
    verify = _verify(paths.plan, down=0, holds=True)
    burst = Figures(requests=2500, attainment=0.97, meets_slo=True, ttft_p95_s=1.42)
    phases = [*verify.phases, Phase(name="burst", role="burst", rate_rps=84.0, duration_s=30,
                                    measured=burst)]  # fmt: skip
    verify = verify.model_copy(update={"phases": phases, "held_burst": True, "recovery_s": 14.0})
    path = root / "verify.json"
    path.write_text(verify.model_dump_json(by_alias=True))
    return paths.profile, paths.plan, ["--verify", str(path)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_given_limit_renders_without_a_run_and_the_burst_risk_is_the_fleets(
    lang: str, tmp_path: Path
) -> None:
    profile, plan, verify = _given(tmp_path)
    pdf = tmp_path / "v.pdf"
    args = ["report", "--profile", str(profile), "--plan", str(plan), *verify, "--lang", lang]
    result = runner.invoke(app, [*args, "-o", str(pdf)])
    assert result.exit_code == 0, result.output
    text = _text(pdf)
    if lang == "zh":
        assert "为给定值，未经实测" in text and "在机队上（机队验证" in text
        return
    assert "The per-instance limit of 17.4 req/s was given, not measured" in text
    assert "Load test and limit" not in text and "Search levels" not in text
    assert "No burst-recovery stage was measured" not in text
    assert (
        "On the fleet (capplan verify, n=4 of 4 planned instances), a 30 s burst at 84 req/s "
        "(2× the design peak): TTFT p95 reached 1.42 s during it and the SLO held; TTFT p95 "
        "was back under the SLO's threshold 14 s after it."
    ) in text


def test_a_measured_limit_without_its_run_exits_2_naming_run(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    args = ["report", "--profile", str(paths.profile), "--plan", str(paths.plan)]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "r.pdf")])
    assert result.exit_code == 2
    assert "missing --run" in result.output and "Traceback" not in result.output
