"""`capplan plan` end to end: plan.json with every input, the table, clean errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import LimitLevel, LimitResult
from contracts.plan import Plan
from planner.engine import build_engine_config
from planner.fleet.calibration import level_metrics
from profiles.model import save_profile
from testkit.profiles import make_profile

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
    # every figure says whose it is: the fleet's or one instance's
    for label in ("Demand, whole fleet", "limit per instance", "Resources, per instance"):
        assert label in result.output
    assert "requests in flight across the fleet at the peak" in result.output


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


def test_plan_from_a_measured_limit_json_calibrates_the_fleet_check(tmp_path: Path) -> None:
    """A limit.json 'measured' on a slower engine: the plan calibrates before simulating."""
    truth = build_engine_config("H100-80GB", "llama-3.1-8b").model_copy(
        update={"mfu": 0.35, "mbu": 0.55, "step_overhead_s": 0.004}
    )
    profile = make_profile(window_rates_60s=[float(i) / 10 for i in range(101)])
    profile_path = tmp_path / "p.json"
    save_profile(profile, profile_path)
    levels = []
    for load in (2.0, 4.0, 6.0):
        m = level_metrics(profile, truth, load, "rate", 40.0, rng_seed=3)
        levels.append(
            LimitLevel(
                load=load,
                stage=f"r{load:g}",
                requests=1,
                completed=1,
                metrics={"tpot_p50_s": m["tpot_p50_s"], "ttft_p50_s": m["ttft_p50_s"]},
                constraints=[],
                verdict="pass" if load < 6 else "fail",
                mean_e2e_s=m["e2e_mean_s"],
            )
        )
    result = LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=4.0,
        infeasible_min=6.0,
        binding="tpot:p95",
        slo="tpot:p95<=40ms",
        tolerance=0.1,
        levels=levels,
    )
    limit_path = tmp_path / "limit.json"
    limit_path.write_text(result.model_dump_json(by_alias=True))
    out = tmp_path / "plan.json"
    args = [
        "plan",
        "--profile",
        str(profile_path),
        "--limit",
        str(limit_path),
        "--fleet-span",
        "30",
        "-o",
        str(out),
    ]
    mismatch = runner.invoke(app, [*args, "--slo", "tpot:p95<=50ms"])
    assert mismatch.exit_code == 2 and "measured under the SLO" in mismatch.output
    result_cli = runner.invoke(app, args)
    assert result_cli.exit_code == 0, result_cli.output
    plan = Plan.model_validate_json(out.read_text())
    assert plan.inputs.slo == "tpot:p95<=40ms"
    assert plan.demand.mean_e2e_source == "measured at the limit (limit.json)"
    assert plan.instances == 4  # ceil(9.9 x 1.2 / 4) + 1
    fleet = plan.checks.fleet
    assert fleet is not None and fleet.calibration is not None
    assert fleet.calibration["mean_rel_error"] < fleet.calibration["default_mean_rel_error"]
    assert "calibrated" in " ".join(plan.notes)


def test_format_json_prints_the_plan_for_scripts(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    args = ["plan", "--profile", str(_profile(tmp_path)), "--limit", "4rps", "--no-fleet-check"]
    result = runner.invoke(app, [*args, "-o", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    printed = Plan.model_validate_json(result.stdout)
    assert printed == Plan.model_validate_json(out.read_text())
    assert f"wrote {out}" in result.stderr and "wrote" not in result.stdout
    bad = runner.invoke(app, [*args, "-o", str(out), "--format", "yaml"])
    assert bad.exit_code == 2 and "choose one of table, json" in bad.output


def test_plan_as_deployed_counts_tp_x_pp_gpus_and_records_the_precision(tmp_path: Path) -> None:
    out = tmp_path / "deployed.json"
    args = ["plan", "--profile", str(_profile(tmp_path)), "--limit", "2rps", "--no-fleet-check"]
    args += ["--slo", "ttft:p95<=2s", "--model", "llama-3.1-70b", "--gpu", "H100-80GB"]
    args += ["--tp", "2", "--pp", "2", "--quantization", "fp8", "--kv-cache-dtype", "fp8"]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    plan = Plan.model_validate(json.loads(out.read_text()))
    assert plan.resources.gpus == 4 * plan.instances
    # The printed arithmetic counts the stages too (it said "2 x H100-80GB x tp=2 = 8 GPUs").
    flat = " ".join(result.output.split())
    n = plan.instances
    assert f"{n} x H100-80GB x tp=2 x pp=2 = {4 * n} GPUs" in flat
    assert f"on H100-80GB x 4 ({4 * n} GPUs" in flat
    assert (plan.inputs.pp, plan.inputs.quantization, plan.inputs.kv_cache_dtype) == (
        2,
        "fp8",
        "fp8",
    )
    # fp8 weights over tp 2 x pp 2: a quarter of 70.55 GB on each GPU
    assert plan.resources.gpu_memory.weights_bytes_per_gpu == 70_553_706_496 // 4
    bad = runner.invoke(app, [*args[:-6], "--quantization", "nvfp4", "-o", str(out)])
    assert bad.exit_code == 2 and "needs FP4 tensor cores" in bad.output


def test_a_config_json_model_is_kept_as_its_path_for_verify(tmp_path: Path) -> None:
    from planner.verify.simulate import plan_engine

    hf = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "Llama-3.1-8B" / "config.json"
    out = tmp_path / "hf.json"
    args = ["plan", "--profile", str(_profile(tmp_path)), "--limit", "4rps", "--no-fleet-check"]
    result = runner.invoke(app, [*args, "--model", str(hf), "-o", str(out)])
    assert result.exit_code == 0, result.output
    plan = Plan.model_validate(json.loads(out.read_text()))
    assert plan.inputs.model == str(hf)
    assert plan_engine(plan).model.params == 8_030_261_248


def test_a_limit_the_engine_model_cannot_hold_is_named_as_such(tmp_path: Path) -> None:
    """A given limit far above what the engine model expects of the GPU: the model queues
    there, so the KV shortfall it implies is the model disagreeing with the limit, and the
    note says that (a bug hunt read "KV headroom -38 % ... raise --tp" beside a fleet
    simulation whose TPOT was 11 ms); a limit it can hold leaves no such note."""
    out = tmp_path / "plan.json"
    args = ["plan", "--profile", str(_profile(tmp_path)), "--no-fleet-check", "-o", str(out)]
    for limit, noted in (("400rps", True), ("2rps", False)):
        result = runner.invoke(app, [*args, "--limit", limit])
        assert result.exit_code == 0, result.output
        notes = [n["key"] for n in json.loads(out.read_text())["note_findings"]]
        assert ("note.kv_short_simulated" in notes) == noted, (limit, notes)
        assert "note.kv_short" not in notes
        flat = " ".join(result.output.split())
        assert ("the engine model queues at the limit given" in flat) == noted
