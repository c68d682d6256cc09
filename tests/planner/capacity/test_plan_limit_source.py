"""`capplan plan` says where its per-instance limit came from: a limit.json capplan measured,
or a number measured elsewhere (`--limit 17.4rps`, from vLLM bench or guidellm)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from testkit.profiles import make_profile
from testkit.report_inputs import build_limit


def _plan(tmp_path: Path, limit: str) -> tuple[str, dict[str, object]]:
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    out = tmp_path / "plan.json"
    args = ["plan", "--profile", str(profile), "--limit", limit, "--no-fleet-check"]
    result = CliRunner().invoke(app, [*args, "-o", str(out)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split()), json.loads(out.read_text())["inputs"]["limit"]


def test_a_limit_measured_elsewhere_is_planned_with_and_named(tmp_path: Path) -> None:
    """Would fail if the number were refused or printed as if capplan had measured it."""
    output, limit = _plan(tmp_path, "17.4rps")
    assert limit["value"] == 17.4 and limit["unit"] == "rps" and limit["source"] == "17.4rps"
    assert "Limit: 17.4 req/s per instance, given as --limit 17.4rps: measured elsewhere" in output


def test_a_measured_limit_names_its_file_and_slo(tmp_path: Path) -> None:
    path = tmp_path / "limit.json"
    path.write_text(build_limit().model_dump_json(by_alias=True))
    output, _ = _plan(tmp_path, str(path))
    assert f"measured by capplan limit ({path}) under ttft:p95<=2s" in output
