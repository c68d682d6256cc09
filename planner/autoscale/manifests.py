"""The Kubernetes objects for a metric-driven policy: a KEDA ScaledObject and an HPA alternative.

The KEDA object (keda.sh/v1alpha1) carries a Prometheus trigger on the engine's own metric
name (vLLM: `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`,
`vllm:request_success_total`); the HPA (autoscaling/v2) reads the same metric as a Pods
metric, which needs prometheus-adapter (or KEDA's metrics server) to serve it under the name
given, colons replaced by underscores. Both carry the policy's min/max, its scale-down
stabilisation window and scale up without one, as the simulation did. A schedule has no
metric: its manifests are a metric-driven policy's, named as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.autoscale import AutoscaleManifests, PolicySpec
from contracts.errors import ConfigError, InputError
from profiles.prometheus.engines import ENGINES

# KV-cache usage gauges (a fraction 0..1) per engine; the queue and rate metrics come from
# the engine table the Prometheus reader uses.
_KV_USAGE = {
    "vllm": "vllm:kv_cache_usage_perc",
    "vllm-v0": "vllm:gpu_cache_usage_perc",
    "sglang": "sglang:token_usage",
}
DEFAULT_PROMETHEUS = "http://prometheus.monitoring.svc:9090"


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the objects scale and where the metrics live."""

    deployment: str
    namespace: str = "default"
    engine: str = "vllm"
    prometheus_url: str = DEFAULT_PROMETHEUS
    selector: str = ""  # label selector inside the braces, e.g. 'job="vllm"'


def metric_query(spec: PolicySpec, target: Target) -> tuple[str, str]:
    """(engine metric name, PromQL summed over the fleet) of a metric-driven policy.

    Raises ConfigError for a schedule, an unknown engine or one without the metric.
    """
    engine = ENGINES.get(target.engine)
    if engine is None:
        raise ConfigError(f"unknown engine {target.engine!r}; known: {', '.join(ENGINES)}")
    sel = "{" + target.selector + "}" if target.selector else ""
    if spec.kind == "rate":
        name = engine.requests[0]
        return name, f"sum(rate({name}{sel}[1m]))"
    if spec.kind == "reactive" and spec.metric == "queue" and engine.waiting:
        name = engine.waiting[0]
        return name, f"sum({name}{sel})"
    if spec.kind == "reactive" and spec.metric == "kv" and target.engine in _KV_USAGE:
        name = _KV_USAGE[target.engine]
        return name, f"sum({name}{sel})"
    raise ConfigError(f"no {spec.label} metric for engine {target.engine!r} to write a trigger on")


def _quantity(value: float) -> str:
    """A Kubernetes quantity: whole numbers plain, fractions in milli-units ('700m')."""
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{max(1, round(value * 1000))}m"


def _period_s(seconds: float) -> int:
    """An HPA policy period: whole seconds in 1..1800."""
    return int(max(1, min(round(seconds), 1800)))


def _ref(target: Target) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.deployment}


def _behavior(spec: PolicySpec) -> dict[str, Any]:
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": int(round(min(spec.window_s, 3600))),
            "policies": [
                {
                    "type": "Percent",
                    "value": 100,
                    "periodSeconds": int(max(1, min(spec.cooldown_s, 1800))),
                }
            ],
        },
    }


def _metadata(target: Target) -> dict[str, str]:
    return {"name": f"{target.deployment}-autoscale", "namespace": target.namespace}


def _deployment_ref(target: Target) -> dict[str, str]:
    """The Deployment both objects scale."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.deployment}


def keda_scaled_object(
    spec: PolicySpec, target: Target, threshold: float, max_replicas: int
) -> dict[str, Any]:
    """The ScaledObject of `spec` with a Prometheus trigger at `threshold` per replica."""
    _, query = metric_query(spec, target)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(target),
        "spec": {
            "scaleTargetRef": _deployment_ref(target),
            "pollingInterval": int(round(spec.poll_s)),
            "cooldownPeriod": int(round(max(spec.cooldown_s, spec.window_s))),
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas or max_replicas,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(spec)}},
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


def hpa(spec: PolicySpec, target: Target, threshold: float, max_replicas: int) -> dict[str, Any]:
    """The autoscaling/v2 HorizontalPodAutoscaler alternative (a Pods metric, AverageValue)."""
    name, _ = metric_query(spec, target)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(target),
        "spec": {
            "scaleTargetRef": _deployment_ref(target),
            "minReplicas": max(1, spec.min_replicas),  # the HPA cannot scale to zero
            "maxReplicas": spec.max_replicas or max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": name.replace(":", "_")},
                        "target": {"type": "AverageValue", "averageValue": _quantity(threshold)},
                    },
                }
            ],
            "behavior": _behavior(spec),
        },
    }


def write_manifests(
    directory: Path, spec: PolicySpec, target: Target, threshold: float, max_replicas: int
) -> AutoscaleManifests:
    """Write keda-scaledobject.yaml and hpa.yaml into `directory`; their record.

    Raises ConfigError when the policy has no metric, InputError when the folder is unwritable.
    """
    keda = keda_scaled_object(spec, target, threshold, max_replicas)
    alt = hpa(spec, target, threshold, max_replicas)
    name, query = metric_query(spec, target)
    paths = directory / "keda-scaledobject.yaml", directory / "hpa.yaml"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for path, body in zip(paths, (keda, alt), strict=True):
            path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    except OSError as err:
        raise InputError(f"{directory}: cannot write the autoscaling manifests ({err})") from err
    return AutoscaleManifests(
        policy=spec.label,
        keda_path=str(paths[0]),
        hpa_path=str(paths[1]),
        metric_name=name,
        query=query,
        threshold=threshold,
    )
