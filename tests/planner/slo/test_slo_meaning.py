"""`plan` and `compare` judge a limit.json's SLO by its meaning, not its spelling: a limit
measured under `ttft:p95<=2s` plans under `ttft:p95<=2000ms`, and runs whose SLOs list the same
constraints in another order and other units compare."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from testkit.profiles import make_profile
from testkit.report_inputs import build_limit


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    return path


def _limit(tmp_path: Path, name: str, slo: str) -> Path:
    run = tmp_path / name
    run.mkdir()
    limit = build_limit().model_copy(update={"slo": slo, "profile_digest": ""})
    (run / "limit.json").write_text(limit.model_dump_json(by_alias=True))
    return run


def test_plan_takes_a_limit_measured_under_the_same_slo_spelled_otherwise(
    tmp_path: Path, profile: Path
) -> None:
    """Would fail while the SLOs were compared as text (exit 2, 'measured under the SLO')."""
    limit = _limit(tmp_path, "run", "ttft:p95<=2s") / "limit.json"
    args = ["plan", "--profile", str(profile), "--limit", str(limit), "--no-fleet-check"]
    same = CliRunner().invoke(app, [*args, "--slo", "ttft:p95<=2000ms", "-o", f"{tmp_path}/a.json"])
    assert same.exit_code == 0, same.output
    other = CliRunner().invoke(app, [*args, "--slo", "ttft:p95<=1s", "-o", f"{tmp_path}/b.json"])
    assert other.exit_code == 2 and "measured under the SLO 'ttft:p95<=2s'" in other.output


def test_compare_takes_runs_whose_slos_differ_only_in_spelling(
    tmp_path: Path, profile: Path
) -> None:
    a = _limit(tmp_path, "a", "ttft:p95<=2s,tpot:p95<=100ms")
    b = _limit(tmp_path, "b", "TPOT:p95<=0.1s, ttft:p95<=2000ms")
    c = _limit(tmp_path, "c", "ttft:p95<=2s,tpot:p95<=50ms")
    args = ["compare", "--profile", str(profile), "-o", str(tmp_path / "c.json")]
    same = CliRunner().invoke(app, [*args[:1], str(a), str(b), *args[1:]])
    assert same.exit_code == 0, same.output
    other = CliRunner().invoke(app, [*args[:1], str(a), str(c), *args[1:]])
    assert other.exit_code == 2 and "not comparable" in other.output
