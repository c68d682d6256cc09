"""`--calibration cal.json` on `capplan plan` and `whatif`; `capplan calibrate`'s bad input.

The cal.json is made by the product's own fitting from probes simulated on a slow engine,
so the plan built with it must differ from one built with the catalog's factors.
"""

from __future__ import annotations

import json
from pathlib import Path
from tempfile import TemporaryDirectory

from typer.testing import CliRunner

from capplan.cli import app
from contracts.calibration import KvCapacity
from contracts.jsonio import write_model
from planner.calibrate import CalibrateOptions, fit_measured
from planner.calibrate.measure import probe_plan
from planner.engine import build_engine_config
from profiles.model import save_profile
from testkit.profiles import make_profile
from tests.planner.calibrate.calibrate_synthetic import synthetic

runner = CliRunner()
SLOW = dict(mfu=0.05, mbu=0.1, step_overhead_s=5e-3, seq_overhead_s=1e-3, frontend_s=0.05)


def _cal(tmp_path: Path) -> Path:
    truth = build_engine_config("H100-80GB", "llama-3.1-8b", engine="vllm", **SLOW)
    base = build_engine_config("H100-80GB", "llama-3.1-8b", engine="vllm")
    options = CalibrateOptions(
        host="synthetic", served_model="m", gpu="H100-80GB", catalog_model="llama-3.1-8b"
    )
    measured = synthetic(probe_plan(8192, 8), truth)
    path = tmp_path / "cal.json"
    write_model(path, fit_measured(options, base, measured, KvCapacity(source="none"), {}, 1.0))
    return path


def _plan(tmp_path: Path, name: str, *extra: str) -> tuple[int, str, Path]:
    profile = tmp_path / "p.json"
    save_profile(make_profile(), profile)
    out = tmp_path / f"{name}.json"
    result = runner.invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "2rps", "--slo", "e2e:p95<=60s",
         "--no-fleet-check", "-o", str(out), *extra],
    )  # fmt: skip
    return result.exit_code, result.output, out


def test_plan_takes_the_calibrations_factors(tmp_path: Path) -> None:
    code, output, plain = _plan(tmp_path, "plain")
    assert code == 0, output
    code, output, calibrated = _plan(tmp_path, "cal", "--calibration", str(_cal(tmp_path)))
    assert code == 0, output
    e2e = [json.loads(p.read_text())["demand"]["mean_e2e_s"] for p in (plain, calibrated)]
    assert e2e[1] > 2 * e2e[0]


def test_a_calibration_of_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    code, output, _ = _plan(
        tmp_path, "x", "--calibration", str(_cal(tmp_path)), "--model", "qwen2.5-7b"
    )
    assert code == 2
    assert output.strip().splitlines() == [output.strip()]
    assert "the calibration is of" in output


def test_a_file_that_is_not_a_calibration_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "capplan.plan/1"}))
    code, output, _ = _plan(tmp_path, "y", "--calibration", str(bad))
    assert code == 2 and "capplan.calibration/1" in output and "Traceback" not in output


def test_whatif_takes_the_calibration(tmp_path: Path) -> None:
    code, output, _ = _whatif(tmp_path)
    assert code == 0, output
    assert "capplan calibrate of synthetic" in output


def test_calibrate_bad_options_exit_2_without_traceback() -> None:
    for args in (
        ["--budget", "0"],
        ["--gpu", "nope"],
        ["--api-key-env", "CAPPLAN_NO_SUCH_VAR"],
        ["--quantization", "nvfp4"],  # refused before any request: no FP4 cores on an H100
        ["--kv-cache-dtype", "fp4"],
    ):
        result = runner.invoke(
            app, ["calibrate", "--host", "http://127.0.0.1:9", "--model", "llama-3.1-8b",
                  "-o", "/tmp/never.json", *args],
        )  # fmt: skip
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and result.output.startswith("error:")


def _whatif(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    profile = tmp_path / "p.json"
    save_profile(make_profile(), profile)
    out = tmp_path / "w.json"
    result = runner.invoke(
        app,
        ["whatif", "--profile", str(profile), "--slo", "e2e:p95<=60s", "--level-duration", "10",
         "--calibration", str(_cal(tmp_path)), "-o", str(out), *extra],
    )  # fmt: skip
    return result.exit_code, result.output, out


def test_whatif_refuses_a_calibration_of_another_engine_one_or_several() -> None:
    """Would fail if the calibration's engine silently replaced a single --engine."""
    for engines in ("trtllm", "llamacpp", "sglang,vllm"):
        with TemporaryDirectory() as tmp:
            code, output, _ = _whatif(Path(tmp), "--engine", engines)
        assert code == 2, (engines, output)
        assert "the calibration is of the vllm@0.10 engine" in output
        assert ("sglang" if "," in engines else engines) in output


def test_whatif_takes_the_calibrations_engine_by_its_bare_name(tmp_path: Path) -> None:
    code, output, _ = _whatif(tmp_path, "--engine", "vllm")
    assert code == 0, output
