"""`capplan plan --autoscale`: the study and the manifests of the chosen policy, in the plan.

The study goes into plan.json's optional `autoscale` field (one file holds the plan and how
to scale it, and the report reads one file; a plan without it loads as before); the KEDA and
HPA objects are YAML files in a folder beside the plan.
"""

from __future__ import annotations

from pathlib import Path

from contracts.plan import Plan
from planner.autoscale.manifests import DEFAULT_PROMETHEUS, Target, write_manifests
from planner.autoscale.policies import default_max_replicas
from planner.autoscale.run import AutoscaleOptions, manifest_policy, study_autoscaling
from profiles.model import Profile


def manifest_target(profile: Profile, deployment: str, namespace: str) -> Target:
    """Where the objects point: the profile's Prometheus and engine when it was read from one."""
    metrics = profile.source.metrics
    if metrics is None:
        return Target(deployment=deployment, namespace=namespace)
    engine = metrics.engine if metrics.engine in ("vllm", "vllm-v0", "sglang", "tgi") else "vllm"
    return Target(
        deployment=deployment,
        namespace=namespace,
        engine=engine,
        prometheus_url=metrics.url or DEFAULT_PROMETHEUS,
        selector=metrics.match.strip().removeprefix("{").removesuffix("}"),
    )


def autoscale_plan(
    profile: Profile, plan: Plan, options: AutoscaleOptions, folder: Path, target: Target
) -> Plan:
    """`plan` with its autoscaling study, the manifests written into `folder`.

    Raises ConfigError (a plan without an e2e, no metric-driven policy) or InputError (the
    folder cannot be written).
    """
    result = study_autoscaling(profile, plan, options)
    chosen = manifest_policy(result)
    assert chosen.spec is not None and chosen.target_per_replica is not None
    written = write_manifests(
        folder,
        chosen.spec,
        target,
        chosen.target_per_replica,
        default_max_replicas(plan.instances),
    )
    return plan.model_copy(update={"autoscale": result.model_copy(update={"manifests": written})})
