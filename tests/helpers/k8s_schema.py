"""What a Kubernetes API server with KEDA installed would say of a manifest, without a cluster.

`keda_problems` checks a ScaledObject against KEDA's own CRD (vendored, v2.20.2: its
openAPIV3Schema with jsonschema, its `x-kubernetes-validations` CEL rules with cel-python, as
the API server evaluates them) and against the rules of KEDA's admission webhook that need no
cluster state (apis/keda/v1alpha1/scaledobject_webhook.go and scaletriggers_types.go at v2.20.2:
verifyReplicaCount, verifyName, verifyTriggers; and the Prometheus scaler's required metadata,
pkg/scalers/prometheus_scaler.go). The webhook's verifyHpas, verifyScaledObjects and
verifyCPUMemoryScalers read other objects in the cluster and are not checked here.

`hpa_problems` checks an autoscaling/v2 HorizontalPodAutoscaler against the Kubernetes
OpenAPI definitions (vendored, release-1.36) and the API server's validation
(kubernetes/kubernetes pkg/apis/autoscaling/validation/validation.go:
validateHorizontalPodAutoscalerSpec, ValidateCrossVersionObjectReference, validateMetricSpec,
validateMetricTarget, validateBehavior/validateScalingRules/validateScalingPolicy; the name
rule of ValidateHorizontalPodAutoscalerName, a DNS-1123 subdomain).

`prometheus_rule_problems` checks a monitoring.coreos.com/v1 PrometheusRule against
prometheus-operator's own CRD (vendored, v0.93.0: its openAPIV3Schema, e.g. the Duration
pattern of `for:` and `keep_firing_for:`, required `alert`/`record` and `expr`) and the API
server's object-name rules (metadata.name a DNS-1123 subdomain, metadata.namespace a DNS-1123
label).

All three check the object's names as the API server does (metadata.name a DNS-1123
subdomain, metadata.namespace a DNS-1123 label) and KEDA's 63-character limit on a
ScaledObject's name and its HPA's, with the rules the product's manifests are written under
(contracts.k8s), so the rules live once.

All three are strict about unknown fields, as `kubectl apply` is by default (field validation
Strict, Kubernetes 1.27+): a field a schema does not list is a problem, not silently pruned.
Each returns a list of problems, empty when the object would be accepted.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml

from contracts.k8s import is_dns_label, is_dns_subdomain, keda_name_problems

SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "schemas"
KEDA_CRD = SCHEMAS / "keda.sh_scaledobjects-v2.20.2.yaml"
PROMETHEUS_RULE_CRD = SCHEMAS / "monitoring.coreos.com_prometheusrules-v0.93.0.yaml"
HPA_SWAGGER = SCHEMAS / "k8s-1.36-autoscaling-v2-hpa.swagger.json"
HPA_ROOT = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler"
# k8s.io/apimachinery resource.Quantity's grammar (the pattern controller-gen writes into CRDs).
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+"
    r"(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# KEDA v2.20.2 scaledobject_types.go: defaultHPAMinReplicas, defaultHPAMaxReplicas. The
# object-name rules (DNS-1123, KEDA's 63-character names) are the product's: contracts.k8s.
KEDA_DEFAULT_MIN, KEDA_DEFAULT_MAX = 1, 100

# validation.go: MaxPeriodSeconds, MaxStabilizationWindowSeconds.
MAX_PERIOD_S, MAX_WINDOW_S = 1800, 3600


def _strict(schema: Any) -> Any:
    """`schema` with additionalProperties false on every object that lists its properties and
    neither allows extra keys nor preserves unknown fields (kubectl's Strict field validation)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd_schema(path: Path, version_name: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The openAPIV3Schema of version `version_name` of the CRD in `path`, with `metadata` as
    the API server adds it for every custom resource, strict about unknown fields."""
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == version_name]
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = metadata
    return dict(_strict(schema))


@cache
def keda_schema() -> dict[str, Any]:
    """The ScaledObject v1alpha1 openAPIV3Schema of the vendored CRD."""
    metadata = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
        "required": ["name"],
    }
    return _crd_schema(KEDA_CRD, "v1alpha1", metadata)


@cache
def prometheus_rule_schema() -> dict[str, Any]:
    """The PrometheusRule v1 openAPIV3Schema of the vendored prometheus-operator CRD."""
    strings = {"type": "object", "additionalProperties": {"type": "string"}}
    metadata = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": strings,
            "annotations": strings,
        },
        "required": ["name"],
    }
    return _crd_schema(PROMETHEUS_RULE_CRD, "v1", metadata)


def _name_problems(obj: dict[str, Any]) -> list[str]:
    """The API server's rules for an object's names: metadata.name a DNS-1123 subdomain,
    metadata.namespace (default when absent) a DNS-1123 label."""
    meta = obj.get("metadata", {})
    name, namespace = meta.get("name", ""), meta.get("namespace", "default")
    found = [] if is_dns_subdomain(name) else [f"metadata.name {name!r}: not a DNS-1123 subdomain"]
    if not is_dns_label(namespace):
        found.append(f"metadata.namespace {namespace!r}: not a DNS-1123 label")
    return found


def prometheus_rule_problems(obj: dict[str, Any]) -> list[str]:
    """Why the API server with prometheus-operator's CRD installed would refuse `obj`."""
    found = _schema_problems(obj, prometheus_rule_schema())
    if obj.get("apiVersion") != "monitoring.coreos.com/v1" or obj.get("kind") != "PrometheusRule":
        found.append("apiVersion/kind: expected monitoring.coreos.com/v1 PrometheusRule")
    found += _name_problems(obj)
    if not found:
        found += _cel_problems(obj, prometheus_rule_schema(), "")
    return found


@cache
def hpa_schema() -> dict[str, Any]:
    """The HorizontalPodAutoscaler definition of the vendored OpenAPI spec, as a JSON Schema."""
    spec = json.loads(HPA_SWAGGER.read_text(encoding="utf-8"))
    return {"definitions": _strict(spec["definitions"]), "$ref": f"#/definitions/{HPA_ROOT}"}


def _schema_problems(obj: Any, schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(schema)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


@cache
def _cel(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel_problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Every x-kubernetes-validations rule met while walking `value` down `schema`, evaluated
    with `self` bound to the value at that node (as the API server does)."""
    found = []
    for rule in schema.get("x-kubernetes-validations", []):
        program = _cel(rule["rule"])
        result = program.evaluate({"self": celpy.json_to_cel(value)})
        if not isinstance(result, celpy.celtypes.BoolType) or not result:
            found.append(f"{path or '<root>'}: {rule['message']} (CEL: {rule['rule']})")
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                found += _cel_problems(value[key], sub, f"{path}.{key}".lstrip("."))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += _cel_problems(item, schema["items"], f"{path}[{i}]")
    return found


def _keda_webhook_problems(obj: dict[str, Any]) -> list[str]:
    spec, name = obj.get("spec", {}), obj.get("metadata", {}).get("name", "")
    found = []
    low = spec.get("minReplicaCount") or KEDA_DEFAULT_MIN  # GetHPAMinReplicas: 0 reads as 1
    high = spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)
    if low > high:
        found.append(f"MinReplicaCount={low} must be less than MaxReplicaCount={high}")
    if "idleReplicaCount" in spec and spec["idleReplicaCount"] >= low:
        found.append("IdleReplicaCount must be less than MinReplicaCount")
    hpa_name = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("name")
    found += keda_name_problems(name, hpa_name)
    triggers = spec.get("triggers", [])
    if not triggers:
        found.append("no triggers defined in the ScaledObject/ScaledJob")
    names = [t["name"] for t in triggers if t.get("name")]
    if len(names) != len(set(names)):
        found.append("triggerName defined multiple times")
    for i, trigger in enumerate(triggers):
        if trigger.get("type") == "prometheus":
            found += _prometheus_trigger_problems(trigger.get("metadata", {}), i)
    return found


def _prometheus_trigger_problems(meta: dict[str, str], i: int) -> list[str]:
    found = [
        f"triggers[{i}].metadata: missing {key}"
        for key in ("serverAddress", "query", "threshold")
        if not meta.get(key)
    ]
    try:
        float(meta.get("threshold", ""))
    except ValueError:
        found.append(f"triggers[{i}].metadata.threshold: not a number: {meta.get('threshold')!r}")
    return found


def keda_problems(obj: dict[str, Any]) -> list[str]:
    """Why the API server (KEDA's CRD and its CEL rules) or KEDA's webhook would refuse `obj`."""
    found = _schema_problems(obj, keda_schema())
    if obj.get("apiVersion") != "keda.sh/v1alpha1" or obj.get("kind") != "ScaledObject":
        found.append("apiVersion/kind: expected keda.sh/v1alpha1 ScaledObject")
    found += _name_problems(obj)
    if not found:  # CEL runs on objects that passed the schema, as the API server orders it
        found += _cel_problems(obj, keda_schema(), "")
    return found + _keda_webhook_problems(obj)


def _quantity_sign(text: Any) -> int:
    if isinstance(text, int):
        return (text > 0) - (text < 0)
    if not isinstance(text, str) or not QUANTITY.match(text):
        return -2  # not a quantity
    number = re.match(r"^[+-]?[0-9.]+", text)
    value = float(number.group(0)) if number and number.group(0) != "." else 0.0
    return (value > 0) - (value < 0)


def _path_segment_problems(value: str, where: str) -> list[str]:
    if not value:
        return [f"{where}: Required value"]
    if value in (".", "..") or "/" in value or "%" in value:
        return [f"{where}: may not be '.' or '..' and may not contain '/' or '%'"]
    return []


def _metric_problems(metric: dict[str, Any], where: str) -> list[str]:
    kind = metric.get("type", "")
    sources = {"Object", "Pods", "Resource", "ContainerResource", "External"}
    if kind not in sources:
        return [f"{where}.type: Unsupported value {kind!r}"]
    field = kind[0].lower() + kind[1:]
    found = [
        f"{where}.{other}: must populate the given metric source only"
        for other in (s[0].lower() + s[1:] for s in sources)
        if other in metric and other != field
    ]
    source = metric.get(field)
    if source is None:
        return [*found, f"{where}.{field}: must populate information for the given metric source"]
    if kind in ("Pods", "Object", "External") and not source.get("metric", {}).get("name"):
        found.append(f"{where}.{field}.metric.name: must specify a metric name")
    target = source.get("target", {})
    if target.get("type") not in ("Utilization", "Value", "AverageValue"):
        found.append(f"{where}.{field}.target.type: Unsupported value {target.get('type')!r}")
    if target.get("type") == "AverageValue" and _quantity_sign(target.get("averageValue")) != 1:
        found.append(f"{where}.{field}.target.averageValue: must be positive")
    return found


def _rules_problems(rules: dict[str, Any], where: str) -> list[str]:
    found = []
    window = rules.get("stabilizationWindowSeconds", 0)
    if not 0 <= window <= MAX_WINDOW_S:
        found.append(f"{where}.stabilizationWindowSeconds: must be in 0..{MAX_WINDOW_S}")
    if rules.get("selectPolicy", "Max") not in ("Max", "Min", "Disabled"):
        found.append(f"{where}.selectPolicy: Unsupported value")
    if "policies" in rules and not rules["policies"]:
        found.append(f"{where}.policies: must specify at least one Policy")
    for i, policy in enumerate(rules.get("policies", [])):
        at = f"{where}.policies[{i}]"
        if policy.get("type") not in ("Pods", "Percent"):
            found.append(f"{at}.type: Unsupported value {policy.get('type')!r}")
        if policy.get("value", 0) <= 0:
            found.append(f"{at}.value: must be greater than zero")
        if not 0 < policy.get("periodSeconds", 0) <= MAX_PERIOD_S:
            found.append(f"{at}.periodSeconds: must be in 1..{MAX_PERIOD_S}")
    if "tolerance" in rules and _quantity_sign(rules["tolerance"]) < 0:
        found.append(f"{where}.tolerance: must be greater than or equal to 0")
    return found


def _hpa_server_problems(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec", {})
    found = _name_problems(obj)
    low, high = spec.get("minReplicas"), spec.get("maxReplicas", 0)
    if low is not None and low < 1:  # 0 needs the alpha HPAScaleToZero gate and Object/External
        found.append("spec.minReplicas: must be greater than 0")
    if high < 1:
        found.append("spec.maxReplicas: must be greater than 0")
    if low is not None and high < low:
        found.append("spec.maxReplicas: must be greater than or equal to `minReplicas`")
    ref = spec.get("scaleTargetRef", {})
    for key in ("kind", "name"):
        found += _path_segment_problems(ref.get(key, ""), f"spec.scaleTargetRef.{key}")
    for i, metric in enumerate(spec.get("metrics", [])):
        found += _metric_problems(metric, f"spec.metrics[{i}]")
    for direction in ("scaleUp", "scaleDown"):
        if direction in spec.get("behavior", {}):
            found += _rules_problems(spec["behavior"][direction], f"spec.behavior.{direction}")
    return found


def hpa_problems(obj: dict[str, Any]) -> list[str]:
    """Why the Kubernetes API server would refuse `obj` as an autoscaling/v2 HPA."""
    found = _schema_problems(obj, hpa_schema())
    if obj.get("apiVersion") != "autoscaling/v2" or obj.get("kind") != "HorizontalPodAutoscaler":
        found.append("apiVersion/kind: expected autoscaling/v2 HorizontalPodAutoscaler")
    # An object that does not decode never reaches validation.go.
    return found or _hpa_server_problems(obj)
