"""The written manifests against the structure their API servers check.

Checked (no kubectl here): KEDA's ScaledObject `keda.sh/v1alpha1` as its CRD
(kedacore/keda config/crd/bases/keda.sh_scaledobjects.yaml, KEDA v2) requires it:
spec.scaleTargetRef.name, spec.triggers[] with type and metadata (a map of strings), int32
counts and HPA behaviour policies with type/value/periodSeconds; and the Kubernetes
`autoscaling/v2` HorizontalPodAutoscaler (API reference, Kubernetes 1.23+):
spec.scaleTargetRef.kind/name, spec.maxReplicas, metrics[].type with pods.metric.name and
pods.target.type, quantities matching resource.Quantity's pattern. The schema below is
written from those documents, not from the writer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.errors import ConfigError
from planner.autoscale.manifests import Target, write_manifests
from planner.autoscale.policies import parse_policy

QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+"
    r"(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT32 = (int, lambda v: -(2**31) <= v < 2**31)
POLICY = {"type": str, "value": INT32, "periodSeconds": INT32}
RULES = {"?stabilizationWindowSeconds": INT32, "?selectPolicy": str, "?policies": [POLICY]}
BEHAVIOR = {"?scaleUp": RULES, "?scaleDown": RULES}
REF = {"name": str, "?kind": str, "?apiVersion": str}
KEDA = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": str, "?namespace": str},
    "spec": {
        "scaleTargetRef": REF,
        "?pollingInterval": INT32,
        "?cooldownPeriod": INT32,
        "?minReplicaCount": INT32,
        "?maxReplicaCount": INT32,
        "?advanced": {"?horizontalPodAutoscalerConfig": {"?behavior": BEHAVIOR}},
        "triggers": [{"type": str, "?metricType": ("AverageValue", "Value"), "metadata": "strmap"}],
    },
}
HPA = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": str, "?namespace": str},
    "spec": {
        "scaleTargetRef": {"kind": str, "name": str, "?apiVersion": str},
        "?minReplicas": INT32,
        "maxReplicas": INT32,
        "?metrics": [
            {
                "type": ("Pods", "Object", "Resource", "External", "ContainerResource"),
                "?pods": {
                    "metric": {"name": str},
                    "target": {
                        "type": ("AverageValue", "Value", "Utilization"),
                        "?averageValue": "quantity",
                    },
                },
            }
        ],
        "?behavior": BEHAVIOR,
    },
}


def check(value: Any, schema: Any, where: str = "") -> None:
    """Raise AssertionError naming the path where `value` breaks `schema`."""
    if isinstance(schema, dict):
        assert isinstance(value, dict), f"{where}: expected an object"
        keys = {k.lstrip("?"): k for k in schema}
        unknown = set(value) - set(keys)
        assert not unknown, f"{where}: unknown fields {unknown}"
        for name, key in keys.items():
            if name in value:
                check(value[name], schema[key], f"{where}.{name}")
            else:
                assert key.startswith("?"), f"{where}: missing required {name}"
    elif isinstance(schema, list):
        assert isinstance(value, list) and value, f"{where}: expected a non-empty list"
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    elif schema == "strmap":
        assert isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), where
    elif schema == "quantity":
        assert isinstance(value, int) or (isinstance(value, str) and QUANTITY.match(value)), where
    elif isinstance(schema, tuple) and schema and isinstance(schema[0], str):
        assert value in schema, f"{where}: {value!r} not among {schema}"
    elif isinstance(schema, tuple):
        kind, ok = schema
        assert isinstance(value, kind) and not isinstance(value, bool) and ok(value), where
    elif isinstance(schema, str):
        assert value == schema, f"{where}: expected {schema!r}, got {value!r}"
    else:
        assert isinstance(value, schema), f"{where}: expected {schema.__name__}"


@pytest.mark.parametrize(
    ("policy", "threshold", "metric"),
    [
        ("reactive:metric=queue,min=2,max=9", 4.0, "vllm:num_requests_waiting"),
        ("reactive:metric=kv", 0.7, "vllm:kv_cache_usage_perc"),
        ("rate:window=600,cooldown=120", 3.33, "vllm:request_success_total"),
    ],
)
def test_manifests_match_keda_and_hpa_structure(
    tmp_path: Path, policy: str, threshold: float, metric: str
) -> None:
    spec = parse_policy(policy)
    target = Target(deployment="llm", namespace="serving", selector='job="vllm"')
    record = write_manifests(tmp_path, spec, target, threshold, 12)
    keda = yaml.safe_load(Path(record.keda_path).read_text())
    hpa = yaml.safe_load(Path(record.hpa_path).read_text())
    check(keda, KEDA, "keda")
    check(hpa, HPA, "hpa")
    trigger = keda["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and metric in trigger["metadata"]["query"]
    assert float(trigger["metadata"]["threshold"]) == pytest.approx(threshold, rel=1e-5)
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == metric.replace(":", "_")
    assert keda["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"
    ] == int(spec.window_s)
    assert keda["spec"]["minReplicaCount"] == spec.min_replicas


def test_the_check_rejects_a_broken_object(tmp_path: Path) -> None:
    record = write_manifests(tmp_path, parse_policy("rate"), Target(deployment="x"), 2.5, 4)
    hpa = yaml.safe_load(Path(record.hpa_path).read_text())
    del hpa["spec"]["maxReplicas"]
    with pytest.raises(AssertionError, match="maxReplicas"):
        check(hpa, HPA, "hpa")
    keda = yaml.safe_load(Path(record.keda_path).read_text())
    keda["spec"]["triggers"][0]["metadata"]["threshold"] = 2.5  # a number, not a string
    with pytest.raises(AssertionError):
        check(keda, KEDA, "keda")


def test_schedule_or_missing_metric_has_no_trigger(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no schedule metric"):
        write_manifests(tmp_path, parse_policy("schedule"), Target(deployment="x"), 1.0, 4)
    with pytest.raises(ConfigError, match="no reactive-kv metric for engine 'tgi'"):
        write_manifests(
            tmp_path, parse_policy("reactive:metric=kv"), Target(deployment="x", engine="tgi"), 1, 4
        )
