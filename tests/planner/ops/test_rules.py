"""`capplan plan`'s alert rules against the real promtool: `check rules`, and a `test rules`
case per alert that fires when its line is crossed and stays quiet below it.

The plan: a 9 req/s peak, 4 req/s per instance, 20 % headroom, N+1, `ttft:p95<=2s,
tpot:p95<=0.1s`. By hand: ceil(9 x 1.2 / 4) + 1 = 4 instances, 3 serving, so a capacity of
12 req/s and 10 req/s sized for; the TTFT attainment counts vLLM's 1.0 s bucket (the largest
of its TTFT buckets within 2 s). A quiet case also evaluates the alert's quantity, so it is
quiet because the quantity is below the line, not because the expression matched nothing.
promtool is required: the tests fail (they do not skip) without it; scripts/test.sh installs
Debian's prometheus package, which ships it.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.plan import Plan

COMMON = {"severity": "warning", "source": "capplan"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: install Debian's prometheus package (scripts/test.sh)"
    return found


def test_the_plan_writes_rules_prometheus_accepts(planned: tuple[Plan, Path]) -> None:
    plan, out = planned
    assert plan.instances == 4 and plan.ops is not None
    t = plan.ops.thresholds
    assert (t.capacity.value, t.planned_load.value) == (12.0, pytest.approx(10.0))
    assert (t.ttft_s and t.ttft_s.value, t.tpot_s and t.tpot_s.value) == (2.0, 0.1)
    assert (t.slo_quantile, t.ttft_bucket_s) == (0.95, 1.0)
    checked = subprocess.run(
        [promtool(), "check", "rules", plan.ops.rule_groups], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(plan.ops.alerts)} rules found" in checked.stdout
    groups = yaml.safe_load(Path(plan.ops.rule_groups).read_text())
    operator = yaml.safe_load(Path(plan.ops.prometheus_rule).read_text())
    assert operator["kind"] == "PrometheusRule" and operator["spec"] == groups
    for rule in groups["groups"][0]["rules"]:
        assert rule["for"] and f"-o {out}" in rule["annotations"]["runbook"]
        assert rule["annotations"]["runbook"].startswith("Re-plan: capplan plan --profile ")


def _counter(name: str, per_s: float, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": f"0+{per_s * 60:g}x60"}


def _gauge(name: str, value: float, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": f"{value!r}x60"}


def _histogram(name: str, cumulative: dict[str, float]) -> list[dict[str, str]]:
    """Buckets growing by `cumulative[le]` requests a minute, and the count."""
    series = [_counter(f"{name}_bucket", n / 60.0, le=le) for le, n in cumulative.items()]
    return [*series, _counter(f"{name}_count", cumulative["+Inf"] / 60.0)]


TTFT = "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
SLOW = {"1.0": 80, "2.5": 88, "5.0": 100, "+Inf": 100}  # p95 = 2.5 + 7/12 x 2.5 s; 80 % <= 1 s
FAST = {"1": 97, "2.5": 100, "5.0": 100, "+Inf": 100}  # p95 = 95/97 s; 97 % <= 1 s (le as Prom 3)
TPOT_SLOW = {"0.1": 90, "0.15": 100, "+Inf": 100}  # p95 = 0.1 + 5/10 x 0.05 = 0.125 s
TPOT_FAST = {"0.075": 96, "0.1": 100, "+Inf": 100}  # p95 = 0.075 x 95/96 s


def _cases(plan: Plan) -> dict[str, tuple[list[Any], list[Any], dict[str, str], float]]:
    """alert -> (series crossing the line, series below it, the firing labels, the quantity
    below it). Queue and KV lines are the plan's own record (their origin: test_thresholds)."""
    assert plan.ops is not None
    t = plan.ops.thresholds
    q, kv = t.queue_per_instance.value, t.kv_usage.value
    req = "vllm:request_success_total"
    return {
        "CapplanLoadAbovePlan": ([_counter(req, 5.5, instance="a"),
                                  _counter(req, 5.5, instance="b")],
                                 [_counter(req, 9.0, instance="a")], COMMON, 9.0),
        "CapplanLoadAtCapacity": ([_counter(req, 13.0, instance="a")],
                                  [_counter(req, 11.0, instance="a")],
                                  {**COMMON, "severity": "critical"}, 11.0),
        "CapplanQueueAboveLimit": ([_gauge("vllm:num_requests_waiting", q + 1, instance="a"),
                                    _gauge("vllm:num_requests_waiting", 0, instance="b")],
                                   [_gauge("vllm:num_requests_waiting", q * 0.9, instance="a")],
                                   {**COMMON, "instance": "a"}, q * 0.9),
        "CapplanKvCacheHigh": ([_gauge("vllm:kv_cache_usage_perc", kv * 1.2, instance="b")],
                               [_gauge("vllm:kv_cache_usage_perc", kv * 0.8, instance="b")],
                               {**COMMON, "instance": "b"}, kv * 0.8),
        "CapplanTtftP95AboveSlo": (_histogram(TTFT, SLOW), _histogram(TTFT, FAST),
                                   {**COMMON, "severity": "critical"}, 0.95 / 0.97),
        "CapplanTpotP95AboveSlo": (_histogram(TPOT, TPOT_SLOW), _histogram(TPOT, TPOT_FAST),
                                   {**COMMON, "severity": "critical"}, 0.075 * 95 / 96),
        "CapplanSloAttainmentLow": (_histogram(TTFT, SLOW), _histogram(TTFT, FAST),
                                    {**COMMON, "severity": "critical"}, 0.97),
    }  # fmt: skip


def _quantity(expr: str) -> str:
    """The alert's quantity: its expression without the comparison with the line."""
    for op in (" > ", " < "):
        if op in expr:
            return expr.rsplit(op, 1)[0]
    raise AssertionError(expr)


def test_each_alert_fires_above_its_line_and_is_quiet_below(
    planned: tuple[Plan, Path], tmp_path: Path
) -> None:
    plan, _ = planned
    assert plan.ops is not None
    groups = yaml.safe_load(Path(plan.ops.rule_groups).read_text())
    rules = {r["alert"]: r for r in groups["groups"][0]["rules"]}
    cases = _cases(plan)
    assert set(cases) == set(rules) == set(plan.ops.alerts)
    # promtool compares annotations exactly, and these carry rendered values: the cases test
    # the expressions, windows and labels; `check rules` above parsed the templates.
    for rule in rules.values():
        rule.pop("annotations")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
    tests = []
    for name, (above, below, labels, value) in cases.items():
        tests.append(
            {
                "interval": "1m",
                "input_series": above,
                "alert_rule_test": [
                    {"eval_time": "40m", "alertname": name, "exp_alerts": [{"exp_labels": labels}]}
                ],
            }
        )
        quiet = {"eval_time": "40m", "alertname": name, "exp_alerts": []}
        tests.append({"interval": "1m", "input_series": below, "alert_rule_test": [quiet],
                      "promql_expr_test": [{"expr": f"round({_quantity(rules[name]['expr'])}, "
                                                    f"{1 / 1024!r})",
                                            "eval_time": "40m",
                                            "exp_samples": [_sample(name, value)]}]})  # fmt: skip
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    ran = subprocess.run(
        [promtool(), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


def _sample(name: str, value: float) -> dict[str, Any]:
    """The quantity's sample to 1/1024 (a binary fraction both sides round to exactly)."""
    value = math.floor(value * 1024 + 0.5) / 1024
    labels = '{instance="a"}' if "Queue" in name else '{instance="b"}' if "Kv" in name else "{}"
    return {"labels": labels, "value": value}
