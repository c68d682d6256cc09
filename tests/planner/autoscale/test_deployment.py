"""`--deployment NAMESPACE/NAME`: refused (exit 2, naming the option and the rule) where the
API server or KEDA would refuse the objects named after it, with --autoscale and without; the
longest name accepted writes objects that the validators of tests/helpers/k8s_schema.py pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import ConfigError
from contracts.plan import Plan
from planner.autoscale.manifests import MAX_DEPLOYMENT_NAME, DeploymentRef, parse_deployment
from profiles.model import save_profile
from profiles.presets import preset_profile
from tests.helpers.k8s_schema import hpa_problems, keda_problems, prometheus_rule_problems

BAD = [
    ("prod/My_Deploy", "name 'My_Deploy' must be a DNS-1123 subdomain"),
    ("prod/" + "a" * 60, "HPA name 'keda-hpa-" + "a" * 60 + "-autoscale' is longer than 63"),
    ("prod/" + "a" * 45, f"use a name of at most {MAX_DEPLOYMENT_NAME} characters"),
    ("a/b/c", "expected NAMESPACE/NAME"),
    ("Vllm", "name 'Vllm' must be a DNS-1123 subdomain"),
    ("Prod_NS/vllm", "namespace 'Prod_NS' must be a DNS-1123 label"),
    ("/vllm", "namespace '' must be a DNS-1123 label"),
    ("n" * 64 + "/vllm", "must be a DNS-1123 label"),
    ("prod/vllm.", "must be a DNS-1123 subdomain"),
]


@pytest.mark.parametrize(("text", "words"), BAD)
def test_a_name_kubernetes_refuses_is_refused(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match="--deployment") as err:
        parse_deployment(text)
    assert words in str(err.value)


def test_names_kubernetes_takes_are_taken() -> None:
    assert parse_deployment("default/vllm") == DeploymentRef(namespace="default", name="vllm")
    # a bare name is in the namespace `default`, as kubectl takes it (as capplan always did)
    assert parse_deployment("vllm") == DeploymentRef(namespace="default", name="vllm")
    longest = "v" * (MAX_DEPLOYMENT_NAME - 4) + ".1-b"
    assert parse_deployment(f"team-a/{longest}").name == longest
    assert MAX_DEPLOYMENT_NAME == 44  # 63 - len("keda-hpa-") - len("-autoscale")


def _plan(tmp_path: Path, deployment: str, *extra: str) -> tuple[int, str, Path]:
    profile, out = tmp_path / "chat.json", tmp_path / "plan.json"
    save_profile(preset_profile("chat", rate_rps=10.0), profile)
    result = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "4rps", "--slo", "ttft:p95<=2s",
         "--no-fleet-check", "--deployment", deployment, "-o", str(out), *extra],
    )  # fmt: skip
    return result.exit_code, result.output, out


@pytest.mark.parametrize("autoscale", [[], ["--autoscale"]])
@pytest.mark.parametrize(("text", "words"), BAD[:6])
def test_the_plan_command_exits_2(
    tmp_path: Path, autoscale: list[str], text: str, words: str
) -> None:
    code, output, out = _plan(tmp_path, text, *autoscale)
    assert code == 2, output
    said = " ".join(output.split())
    assert "--deployment" in said and words in said and "Traceback" not in output
    assert not out.exists()


def test_the_longest_name_writes_objects_kubernetes_takes(tmp_path: Path) -> None:
    name = "x" * MAX_DEPLOYMENT_NAME
    code, output, out = _plan(tmp_path, f"serving/{name}", "--autoscale")
    assert code == 0, output
    plan = Plan.model_validate_json(out.read_text())
    assert plan.autoscale is not None and plan.autoscale.manifests is not None
    keda = yaml.safe_load(Path(plan.autoscale.manifests.keda_path).read_text())
    assert keda["metadata"] == {"name": f"{name}-autoscale", "namespace": "serving"}
    assert keda_problems(keda) == []
    assert plan.autoscale.manifests.hpa_path is not None
    assert hpa_problems(yaml.safe_load(Path(plan.autoscale.manifests.hpa_path).read_text())) == []
    assert plan.ops is not None
    rule = yaml.safe_load(Path(plan.ops.prometheus_rule).read_text())
    assert rule["metadata"]["namespace"] == "serving" and prometheus_rule_problems(rule) == []
