"""`capplan plan` says where its per-instance limit came from: a limit.json capplan measured,
or a number measured elsewhere (`--limit 17.4rps`, from vLLM bench or guidellm)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from planner.whatif.interval import limit_interval
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


def test_a_limit_the_engine_model_made_is_named_predicted_with_its_interval(
    tmp_path: Path,
) -> None:
    """A limit.json whose endpoint was the engine model (the demo's emulator) is planned with,
    kept as a prediction in plan.json and printed so, never as measured."""
    measured = build_limit()
    assert measured.feasible_max is not None
    iv = limit_interval(measured.feasible_max, "vllm", "H100-80GB")
    path = tmp_path / "limit.json"
    path.write_text(
        measured.model_copy(update={"predicted": iv.contract()}).model_dump_json(by_alias=True)
    )
    output, limit = _plan(tmp_path, str(path))
    assert limit["predicted"] == iv.contract().model_dump(mode="json")
    assert (
        f"Limit: 17.4 req/s per instance, predicted, not measured: the engine model's ({path}, "
        f"a load test of capplan's emulator) under ttft:p95<=2s; a GPU's is expected between "
        f"{iv.low_rps:.3g} and {iv.high_rps:.3g} req/s ({iv.note})" in output
    ), output
    assert "measured by capplan limit" not in output


def test_a_whatif_json_is_refused_with_the_reason(tmp_path: Path) -> None:
    """Its limits are predictions, each planned in whatif with its interval: plan says so
    (exit 2) instead of 'expected schema capplan.limit/1'."""
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    whatif = tmp_path / "whatif.json"
    whatif.write_text(json.dumps({"schema": "capplan.whatif/1", "candidates": []}))
    result = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", str(whatif), "-o", str(tmp_path / "p.json")],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "a whatif.json holds the engine model's predicted limits" in said, said
    assert f"capplan report --whatif {whatif}" in said
