"""`capplan plan --autoscale`: the study in plan.json, the manifests, the default cold start
said in the output, old plans still loading, and bad policy values exiting 2 with a message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from profiles.model import save_profile
from profiles.presets import preset_profile

runner = CliRunner()


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    save_profile(preset_profile("chat", rate_rps=10.0), path)
    return path


def _plan(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    out = tmp_path / "plan.json"
    args = [
        "plan",
        "--profile",
        str(_profile(tmp_path)),
        "--limit",
        "4rps",
        "--slo",
        "ttft:p95<=2s",
        "--no-fleet-check",
        "--autoscale",
        "-o",
        str(out),
        *extra,
    ]
    result = runner.invoke(app, args)
    return result.exit_code, result.output, out


def test_autoscale_writes_study_and_manifests(tmp_path: Path) -> None:
    code, output, out = _plan(tmp_path)
    assert code == 0, output
    plan = Plan.model_validate_json(out.read_text())
    auto = plan.autoscale
    assert auto is not None and auto.cold_start_s == 240.0
    assert "cold start 240 s" in output
    assert {o.label for o in auto.policies} == {"reactive-queue", "reactive-kv", "rate", "schedule"}
    assert auto.recommended in {o.label for o in auto.policies}
    for o in auto.policies:
        assert len(o.hourly_attainment) == 24 and 0 <= o.attainment <= 1
        assert o.cost_vs_static == pytest.approx(o.gpu_hours / auto.static.gpu_hours)
    assert auto.manifests is not None
    keda = yaml.safe_load(Path(auto.manifests.keda_path).read_text())
    assert keda["kind"] == "ScaledObject"
    assert keda["spec"]["triggers"][0]["metadata"]["query"] == auto.manifests.query
    assert Path(auto.manifests.hpa_path).parent == tmp_path / "plan-autoscale"
    # each policy not recommended says why, in the policy's own figures
    for o in auto.policies:
        if o.label != auto.recommended:
            assert f"not {o.label}: " in output
            below = f"{o.attainment:.1%} attainment, below the 0.95 target"
            cheaper = f"meets the target at {o.cost_vs_static:.1%} of the static GPU-hours"
            assert (below if not o.meets_target else cheaper) in " ".join(output.split())


def test_a_queue_policy_that_scales_up_more_than_hourly_is_said_to_flap() -> None:
    """why_not on the figures bench/autoscale_speed.py --rps 10 printed (2026-12-05): the queue
    rule went 1 -> 16 replicas 12,266 times in 2,160 hours at 49.8 % attainment; the KV
    rule, 444 scale-ups, is not said to flap."""
    from contracts.autoscale import AutoscaleResult, PolicyOutcome, PolicySpec
    from planner.autoscale.run import why_not

    def outcome(spec: PolicySpec, attainment: float, cost: float, ups: int) -> PolicyOutcome:
        return PolicyOutcome(
            label=spec.label, spec=spec, attainment=attainment, hourly_attainment=[None] * 24,
            hourly_worst=[None] * 24, gpu_hours=cost * 100, gpu_hours_per_month=cost * 100,
            monthly_cost_usd=cost, cost_vs_static=cost, mean_instances=4, max_instances=16,
            scale_ups=ups, meets_target=attainment >= 0.95,
        )  # fmt: skip

    queue = outcome(PolicySpec(kind="reactive", metric="queue"), 0.498, 1.76, 12266)
    kv = outcome(PolicySpec(kind="reactive", metric="kv"), 0.9956, 0.45, 444)
    rate = outcome(PolicySpec(kind="rate"), 0.9956, 0.452, 2200)
    static = outcome(PolicySpec(kind="schedule"), 1.0, 1.0, 0)
    result = AutoscaleResult.model_construct(
        cold_start_s=240.0, horizon_s=2160 * 3600.0, target_attainment=0.95, static=static,
        policies=[queue, kv, rate], recommended="reactive-kv",
    )  # fmt: skip
    said = why_not(queue, result)
    assert said.startswith("49.8% attainment, below the 0.95 target; it flaps: 12266 scale-ups")
    assert "whenever nothing waits" in said
    assert why_not(kv, result) == (
        "meets the target at 45.0% of the static GPU-hours, reactive-kv at 45.0%"
    )
    flapping_rate = why_not(rate, result)
    assert "it flaps" in flapping_rate and "nothing waits" not in flapping_rate


def test_plan_without_autoscale_field_still_loads(tmp_path: Path) -> None:
    code, output, out = _plan(tmp_path)
    assert code == 0, output
    data = json.loads(out.read_text())
    del data["autoscale"]
    assert Plan.model_validate(data).autoscale is None


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--autoscale-policy", "rate:min=5,max=3"], "min_replicas (5) is above max_replicas (3)"),
        (["--cold-start", "-1"], "--cold-start -1: expected a duration >= 0"),
        (["--autoscale-policy", "reactive:metric=gpu"], "unknown metric 'gpu'; known: queue"),
        (["--autoscale-policy", "magic"], "unknown kind 'magic'; known: reactive, rate, schedule"),
        (["--autoscale-policy", "rate:window=-5"], "window_s"),
        (["--autoscale-policy", "reactive"], "needs metric=queue or metric=kv"),
        (["--autoscale-policy", "rate:poll=0.4"], "poll=0.4 s cannot be written"),
        (["--autoscale-policy", "rate:window=7200"], "window=7200 s cannot be written"),
    ],
)
def test_bad_policy_values_exit_2(tmp_path: Path, extra: list[str], words: str) -> None:
    code, output, out = _plan(tmp_path, *extra)
    assert code == 2, output
    assert words in output and "Traceback" not in output
    assert not out.exists()


def test_min_above_the_default_max_exits_2_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: min=50 on a plan whose default max is 2 x its instances. The fleet
    check and the study would simulate; both are made to fail loudly if they are reached."""
    import planner.autoscale.run
    import planner.capacity.plan

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before refusing the policy")

    monkeypatch.setattr(planner.capacity.plan, "fleet_check", reached)
    monkeypatch.setattr(planner.autoscale.run, "simulate_steps", reached)
    out = tmp_path / "plan.json"
    args = ["plan", "--profile", str(_profile(tmp_path)), "--limit", "4rps", "--slo",
            "ttft:p95<=2s", "--autoscale", "--autoscale-policy", "rate:min=50",
            "-o", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "rate: min=50 is above the default max (12: 2 x the plan); give max=50 or more" in said
    assert "Traceback" not in result.output and not out.exists()
    assert not (tmp_path / "plan-autoscale").exists()


@pytest.mark.parametrize("target", ["2", "1.01", "80"])
def test_a_kv_target_above_1_exits_2(tmp_path: Path, target: str) -> None:
    """vLLM's KV usage is a fraction (0..1 per replica): a target above it never scales up."""
    code, output, out = _plan(tmp_path, "--autoscale-policy", f"reactive:metric=kv,target={target}")
    said = " ".join(output.split())
    assert code == 2, output
    assert f"target={float(target):g} for metric=kv" in said and "in (0, 1]" in said
    assert "vllm:kv_cache_usage_perc" in said and "Traceback" not in output
    assert not out.exists()


def test_kv_targets_within_0_and_1_are_taken() -> None:
    from planner.autoscale.policies import parse_policy

    assert parse_policy("reactive:metric=kv,target=1").target == 1.0
    assert parse_policy("reactive:metric=kv,target=0.8").target == 0.8
    assert parse_policy("reactive:metric=queue,target=4").target == 4.0  # a count, not a share


def test_an_unknown_metric_names_the_metrics_the_manifests_trigger_on(tmp_path: Path) -> None:
    from planner.autoscale.manifests import Target, metric_query
    from planner.autoscale.policies import parse_policy

    code, output, _ = _plan(tmp_path, "--autoscale-policy", "reactive:metric=cache")
    said = " ".join(output.split())
    assert code == 2, output
    for metric in ("queue", "kv"):
        name, _ = metric_query(parse_policy(f"reactive:metric={metric}"), Target(deployment="x"))
        assert f"{metric} ({name})" in said
    assert "gpu_cache_usage_perc" not in said
