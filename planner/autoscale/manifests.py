"""The Kubernetes objects for a metric-driven policy: a KEDA ScaledObject and an HPA alternative.

The KEDA object (keda.sh/v1alpha1) carries a Prometheus trigger on the engine's own metric
name (vLLM: `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`,
`vllm:request_success_total`); the HPA (autoscaling/v2) reads the same metric as a Pods
metric, which needs prometheus-adapter (or KEDA's metrics server) to serve it under the name
given, colons replaced by underscores. Both carry the numbers the simulation ran on: the
replica range from `replicas_for` (the controller's own), the poll, the scale-down
stabilisation window and the HPA tolerance (a beta field, HPAConfigurableTolerance, since
Kubernetes 1.33; older API servers drop it and use the cluster-wide 10 %), and scale up at
once, as the simulation did. A policy whose min is 0 gets the ScaledObject only: the HPA
refuses minReplicas 0 (scale to zero is KEDA's). A schedule has no metric: its manifests are
a metric-driven policy's, named as such.

tests/planner/autoscale/test_manifests.py validates every object against KEDA's CRD (with its CEL
rule) and the Kubernetes OpenAPI schema with the API server's HPA rules, vendored under
tests/fixtures/schemas/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.autoscale import AutoscaleManifests, PolicySpec
from contracts.errors import ConfigError, InputError
from contracts.k8s import (
    KEDA_MAX_NAME,
    LABEL_RULE,
    SUBDOMAIN_RULE,
    is_dns_label,
    is_dns_subdomain,
    keda_hpa_name,
    keda_name_problems,
)
from planner.autoscale.policies import Replicas, policy_kind, replicas_for
from profiles.prometheus.engines import ENGINES

DEFAULT_PROMETHEUS = "http://prometheus.monitoring.svc:9090"


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the objects scale and where the metrics live."""

    deployment: str
    namespace: str = "default"
    engine: str = "vllm"
    prometheus_url: str = DEFAULT_PROMETHEUS
    selector: str = ""  # label selector inside the braces, e.g. 'job="vllm"'


@dataclass(frozen=True, kw_only=True)
class DeploymentRef:
    """The Deployment of `--deployment NAMESPACE/NAME`, checked by `parse_deployment`."""

    namespace: str
    name: str


def scaled_object_name(deployment: str) -> str:
    """The name of the ScaledObject and of the HPA that scale `deployment`."""
    return f"{deployment}-autoscale"


# The longest Deployment name whose objects KEDA takes: keda-hpa-NAME-autoscale within 63.
MAX_DEPLOYMENT_NAME = KEDA_MAX_NAME - len(keda_hpa_name(scaled_object_name("")))


def parse_deployment(text: str) -> DeploymentRef:
    """`NAMESPACE/NAME` (or `NAME`, in the namespace `default`, as kubectl takes it) as a
    DeploymentRef, with the names the API server and KEDA accept.

    Raises ConfigError naming --deployment and the rule broken: more than one '/', a
    namespace that is no DNS-1123 label, a name that is no DNS-1123 subdomain, or a name whose
    ScaledObject (`NAME-autoscale`) or KEDA's HPA for it (`keda-hpa-NAME-autoscale`) is longer
    than KEDA takes.
    """
    where = f"--deployment {text!r}"
    if text.count("/") > 1:
        raise ConfigError(f"{where}: expected NAMESPACE/NAME (e.g. default/vllm), one '/'")
    namespace, _, name = text.rpartition("/")
    namespace = namespace if "/" in text else "default"  # kubectl's, where none is named
    if not is_dns_label(namespace):
        raise ConfigError(f"{where}: the namespace {namespace!r} must be {LABEL_RULE}")
    if not is_dns_subdomain(name):
        raise ConfigError(f"{where}: the Deployment's name {name!r} must be {SUBDOMAIN_RULE}")
    # A subdomain stays one with "-autoscale" after it; only KEDA's lengths can break.
    problems = keda_name_problems(scaled_object_name(name))
    if problems:
        raise ConfigError(
            f"{where}: the Deployment's name is too long for the objects named after it "
            f"({'; '.join(problems)}, KEDA's limit); use a name of at most "
            f"{MAX_DEPLOYMENT_NAME} characters"
        )
    return DeploymentRef(namespace=namespace, name=name)


def metric_query(spec: PolicySpec, target: Target) -> tuple[str, str]:
    """(engine metric name, PromQL summed over the fleet) of a metric-driven policy.

    Raises ConfigError for a schedule, an unknown engine or one without the metric.
    """
    if target.engine not in ENGINES:
        raise ConfigError(f"unknown engine {target.engine!r}; known: {', '.join(ENGINES)}")
    sel = "{" + target.selector + "}" if target.selector else ""
    found = policy_kind(spec).trigger(spec, target.engine, sel)
    if found is not None:
        return found
    raise ConfigError(f"no {spec.label} metric for engine {target.engine!r} to write a trigger on")


def _quantity(value: float) -> str:
    """A Kubernetes quantity: whole numbers plain, fractions in milli-units ('700m')."""
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{max(1, round(value * 1000))}m"


def _behavior(spec: PolicySpec, replicas: Replicas) -> dict[str, Any]:
    """Scale up at once (up to every replica the range allows in one period), down after the
    window; the timing is whole seconds already (`check_writable` refused anything else)."""
    tolerance = _quantity(spec.tolerance) if spec.tolerance > 0 else "0"
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15},
                {"type": "Pods", "value": replicas.high, "periodSeconds": 15},
            ],
            "tolerance": tolerance,
        },
        "scaleDown": {
            "stabilizationWindowSeconds": int(spec.window_s),
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": int(spec.cooldown_s)}],
            "tolerance": tolerance,
        },
    }


def _metadata(target: Target) -> dict[str, str]:
    return {"name": scaled_object_name(target.deployment), "namespace": target.namespace}


def _deployment_ref(target: Target) -> dict[str, str]:
    """The Deployment both objects scale."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.deployment}


def keda_scaled_object(
    spec: PolicySpec, target: Target, threshold: float, default_max: int
) -> dict[str, Any]:
    """The ScaledObject of `spec` with a Prometheus trigger at `threshold` per replica.

    Raises ConfigError when min is above the max (`replicas_for`) or there is no metric.
    """
    _, query = metric_query(spec, target)
    replicas = replicas_for(spec, default_max)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(target),
        "spec": {
            "scaleTargetRef": _deployment_ref(target),
            "pollingInterval": int(spec.poll_s),
            # KEDA's cooldownPeriod is the wait after the last active poll before it scales
            # to zero, and only that (1..N is the HPA's, under `behavior`; ScaledObject spec,
            # keda.sh/docs reference/scaledobject-spec). The simulated controller reaches zero
            # only once every recommendation in the window is zero and the cooldown has passed
            # since its last scaling, so the larger of the two: with the cooldown alone KEDA
            # would scale to zero a window sooner than simulated, with cold starts the study
            # never counted.
            "cooldownPeriod": int(max(spec.cooldown_s, spec.window_s)),
            "minReplicaCount": replicas.low,
            "maxReplicaCount": replicas.high,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(spec, replicas)}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": target.prometheus_url,
                        "query": query,
                        "threshold": f"{threshold:.6g}",
                    },
                }
            ],
        },
    }


def hpa(spec: PolicySpec, target: Target, threshold: float, default_max: int) -> dict[str, Any]:
    """The autoscaling/v2 HorizontalPodAutoscaler alternative (a Pods metric, AverageValue).

    Raises ConfigError for min 0 (the API server requires minReplicas >= 1 for a Pods
    metric), min above max, or no metric.
    """
    name, _ = metric_query(spec, target)
    replicas = replicas_for(spec, default_max)
    if replicas.low < 1:
        raise ConfigError(
            f"{spec.label}: min=0 has no HPA (minReplicas must be >= 1); KEDA scales to zero"
        )
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(target),
        "spec": {
            "scaleTargetRef": _deployment_ref(target),
            "minReplicas": replicas.low,
            "maxReplicas": replicas.high,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": name.replace(":", "_")},
                        "target": {"type": "AverageValue", "averageValue": _quantity(threshold)},
                    },
                }
            ],
            "behavior": _behavior(spec, replicas),
        },
    }


def write_manifests(
    directory: Path, spec: PolicySpec, target: Target, threshold: float, default_max: int
) -> AutoscaleManifests:
    """Write keda-scaledobject.yaml and (min >= 1) hpa.yaml into `directory`; their record.

    `default_max` is the max replicas when the policy gives none, as the controller had it.
    Raises ConfigError when the policy has no metric or its min is above its max, InputError
    when the folder is unwritable.
    """
    bodies = {directory / "keda-scaledobject.yaml": keda_scaled_object(
        spec, target, threshold, default_max
    )}  # fmt: skip
    hpa_path = directory / "hpa.yaml"
    if spec.min_replicas >= 1:
        bodies[hpa_path] = hpa(spec, target, threshold, default_max)
    name, query = metric_query(spec, target)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for path, body in bodies.items():
            path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    except OSError as err:
        raise InputError(f"{directory}: cannot write the autoscaling manifests ({err})") from err
    return AutoscaleManifests(
        policy=spec.label,
        keda_path=str(directory / "keda-scaledobject.yaml"),
        hpa_path=str(hpa_path) if hpa_path in bodies else None,
        metric_name=name,
        query=query,
        threshold=threshold,
    )
