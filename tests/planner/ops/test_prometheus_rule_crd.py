"""Every PrometheusRule capplan writes against prometheus-operator's own CRD (vendored,
v0.93.0; tests.helpers.k8s_schema): the plan's for a rate limit and a percentile SLO, for a
concurrency limit and an attainment SLO, and the same object with one defect planted, which
the CRD must refuse (so that a pass means the schema was read, not skipped)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from profiles.model import save_profile
from profiles.presets import preset_profile
from tests.helpers.k8s_schema import prometheus_rule_problems


def _rule(plan: Plan) -> dict[str, Any]:
    assert plan.ops is not None
    obj = yaml.safe_load(Path(plan.ops.prometheus_rule).read_text())
    assert isinstance(obj, dict)
    return obj


@pytest.fixture(scope="module")
def attainment_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """A concurrency limit (8 users) and an attainment SLO: other alerts, other units."""
    folder = tmp_path_factory.mktemp("ops-attainment")
    profile = folder / "chat.json"
    save_profile(preset_profile("chat", rate_rps=5.0), profile)
    out = folder / "plan.json"
    result = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "8users", "--peak-rps", "9", "--slo",
         "attainment>=95%:ttft<=2s,tpot<=100ms", "--no-fleet-check", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return Plan.model_validate_json(out.read_text())


def test_the_plans_prometheus_rules_pass_the_operators_crd(
    planned: tuple[Plan, Path], attainment_plan: Plan
) -> None:
    for plan in (planned[0], attainment_plan):
        obj = _rule(plan)
        assert prometheus_rule_problems(obj) == [], obj["spec"]["groups"][0]["name"]
        assert obj["spec"]["groups"][0]["rules"]


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (lambda r: r.update({"for": "5 minutes"}), "does not match"),
        (lambda r: r.pop("expr"), "'expr' is a required property"),
        (lambda r: r.update({"severity": "warning"}), "Additional properties"),
        (lambda r: r["labels"].update({"team": 7}), "is not of type 'string'"),
    ],
)
def test_a_planted_defect_is_refused(planned: tuple[Plan, Path], plant: Any, said: str) -> None:
    obj = copy.deepcopy(_rule(planned[0]))
    plant(obj["spec"]["groups"][0]["rules"][0])
    problems = prometheus_rule_problems(obj)
    assert any(said in p and "spec.groups.0.rules.0" in p for p in problems), problems


def test_a_name_the_api_server_refuses_is_caught(planned: tuple[Plan, Path]) -> None:
    obj = copy.deepcopy(_rule(planned[0]))
    obj["metadata"]["name"] = "Capplan_Chat"
    assert any("DNS-1123 subdomain" in p for p in prometheus_rule_problems(obj))


def test_a_review_service_name_becomes_an_object_name_the_api_server_takes(
    planned: tuple[Plan, Path], tmp_path: Path
) -> None:
    """A review names each service's rules after the service (`Chat_Bot v2`, as a user
    wrote it in review.yaml): the PrometheusRule's name must still be a DNS-1123 subdomain."""
    from planner.ops.write import write_ops

    plan = write_ops(planned[0], tmp_path, replan="capplan review r.yaml", name="Chat_Bot v2..x")
    obj = _rule(plan)
    assert prometheus_rule_problems(obj) == []
    assert obj["metadata"]["name"] == "capplan-chat-bot-v2.x"
