"""The report's fleet-verification page and first-page line, from verify.json files."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.digest import sha256_of
from contracts.finding import Finding
from contracts.run import Stage, StagePlan
from contracts.verify import Figures, InstanceLoad, Phase, Spread, Verify
from testkit.report_inputs import write_fixture

runner = CliRunner()


def _verify(plan: Path, *, down: int, holds: bool) -> Verify:
    measured = Figures(
        requests=400, attainment=0.991 if holds else 0.412, meets_slo=holds,
        ttft_p95_s=0.321, ttft_p99_s=0.654, tpot_p95_s=0.0432, tpot_p99_s=0.0517,
    )  # fmt: skip
    simulated = measured.model_copy(update={"ttft_p95_s": 0.298, "attainment": 0.995})
    stages = StagePlan(stages=[Stage(name="steady", duration_s=60, rate_rps=42.0)])
    serving = 4 - down
    instances = [
        InstanceLoad(url=f"http://10.0.0.{k}:8000", serving=k <= serving, source="metrics",
                     requests=100.0 if k <= serving else 0.0,
                     share=1 / serving if k <= serving else 0.0, flag="ok", kv_usage_mean=0.37)
        for k in range(1, 5)
    ]  # fmt: skip
    key = "verify.holds" if holds else "verify.fails_peak"
    finding = Finding(key=key, values={"serving": serving, "planned": 4, "slo": "ttft:p95<=2s",
                      "rate": 42.0, "burst_s": 30.0, "attainment": measured.attainment,
                      "sim_attainment": 0.995, "recovery": 12.0})  # fmt: skip
    return Verify(
        created_at="2026-12-03T15:00:00Z", capplan_version="0.1.0", plan=str(plan),
        plan_digest=sha256_of(plan), profile="p.json", profile_digest="x", target="http://lb",
        routing="the load balancer at http://lb", slo="ttft:p95<=2s", arrivals="Poisson",
        instances_planned=4, instances_down=down, instances_serving=serving, rate_rps=42.0,
        burst_rps=84.0, stages=stages, run_dir="runs/v", steady_state="warm-up 10 s",
        valid=True, phases=[Phase(name="steady", role="steady", rate_rps=42.0, duration_s=60,
                                  measured=measured, simulated=simulated)],
        recovery_s=12.0 if holds else None, recovery_simulated_s=10.5, held_peak=holds,
        held_burst=False, recovered=holds, holds=holds, instances=instances,
        spread=Spread(measure="finished requests", max_over_fair=1.0, tolerance=0.25),
        sentence=finding.english(), finding=finding,
    )  # fmt: skip


def _text(pdf: Path) -> str:
    tool = shutil.which("pdftotext")
    assert tool, "pdftotext (poppler-utils) is needed; scripts/test.sh installs it"
    out = subprocess.run([tool, str(pdf), "-"], capture_output=True, text=True, check=True)
    return re.sub(r"\s+", " ", out.stdout)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("verify-report")
    paths = write_fixture(root)
    files = []
    for down, holds in ((0, True), (1, False)):
        path = root / f"verify-{down}.json"
        path.write_text(_verify(paths.plan, down=down, holds=holds).model_dump_json(by_alias=True))
        files += ["--verify", str(path)]
    base = ["report", "--profile", str(paths.profile), "--run", str(paths.run_dir), "--plan",
            str(paths.plan)]  # fmt: skip
    with_verify = runner.invoke(app, [*base, *files, "-o", str(root / "v.pdf")])
    assert with_verify.exit_code == 0, with_verify.output
    without = runner.invoke(app, [*base, "-o", str(root / "plain.pdf")])
    assert without.exit_code == 0, without.output
    return _text(root / "v.pdf"), _text(root / "plain.pdf")


def test_the_answer_says_verified_on_the_fleet_and_on_which_date(report: tuple[str, str]) -> None:
    verified, plain = report
    assert "Verified on the fleet on 2026-12-03: n=4 held the SLO at the design peak." in verified
    assert "Not verified on the fleet (no capplan verify run given)." in plain
    assert "Fleet verification" not in plain


def test_the_page_sets_planned_against_measured_at_n_and_n_minus_1(
    report: tuple[str, str],
) -> None:
    text = report[0]
    page = text[text.index("Fleet verification") :]
    assert "n=4 of 4 planned instances held the SLO ttft:p95<=2s" in page
    assert "n=3 of 4 planned instances did NOT hold the SLO" in page
    assert "n=4 measured 99.1 % 321 ms 654 ms 43 ms 52 ms 12 s yes" in page
    assert "n=4 planned 99.5 % 298 ms" in page
    assert "n=3 measured 41.2 %" in page and "not recovered" in page
    assert "http://10.0.0.4:8000 no 0 0.0 %" in page


def test_a_verify_json_of_another_plan_is_refused(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    other = tmp_path / "other-plan.json"
    other.write_text(paths.plan.read_text().replace('"name"', '"name"', 1) + " ")
    path = tmp_path / "verify.json"
    path.write_text(_verify(other, down=0, holds=True).model_dump_json(by_alias=True))
    result = runner.invoke(app, ["report", "--profile", str(paths.profile), "--run",
                                 str(paths.run_dir), "--plan", str(paths.plan), "--verify",
                                 str(path), "-o", str(tmp_path / "r.pdf")])  # fmt: skip
    assert result.exit_code == 2
    assert "verifies another plan" in result.output
