"""Every manifest capplan can write, against what the API servers accept, and the numbers the
simulation ran on.

The checks are KEDA's own CRD (v2.20.2, with its CEL rule evaluated by cel-python) plus the
offline rules of KEDA's admission webhook, and the Kubernetes 1.36 OpenAPI definition of the
HPA plus the API server's HPA validation: tests/helpers/k8s_schema.py, schemas vendored under
tests/fixtures/schemas/ with their sources. None of it is written from the writer.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.errors import ConfigError
from planner.autoscale.manifests import Target, metric_query, write_manifests
from planner.autoscale.policies import (
    Controller,
    Metrics,
    Targets,
    build_policy,
    parse_policy,
    replicas_for,
)
from profiles.prometheus.engines import ENGINES
from tests.helpers.k8s_schema import hpa_problems, keda_problems

KINDS = ("reactive:metric=queue", "reactive:metric=kv", "rate")
OPTIONS = (
    "",
    "min=0",
    "min=3,max=9",
    "min=12",  # = the default max of a 6-instance plan
    "poll=1,window=0,cooldown=1",
    "poll=600,window=3600,cooldown=1800,tolerance=0",
    "target=0.0004,tolerance=0.99",
)
DEFAULT_MAX = 12


def _writable() -> list[tuple[str, str]]:
    """(policy, engine) for every kind, option set and engine that has the kind's metric."""
    cases = []
    for kind, options, engine in itertools.product(KINDS, OPTIONS, ENGINES):
        text = f"{kind},{options}" if ":" in kind and options else f"{kind}:{options}"
        try:
            metric_query(parse_policy(text), Target(deployment="x", engine=engine))
        except ConfigError:
            continue
        cases.append((text.rstrip(":"), engine))
    return cases


def _load(path: str | None) -> dict[str, Any]:
    assert path is not None
    return dict(yaml.safe_load(Path(path).read_text()))


@pytest.mark.parametrize(("policy", "engine"), _writable())
def test_every_writable_manifest_is_accepted(tmp_path: Path, policy: str, engine: str) -> None:
    spec = parse_policy(policy)
    target = Target(deployment="llm", namespace="serving", engine=engine, selector='job="vllm"')
    record = write_manifests(tmp_path, spec, target, spec.target or 3.33, DEFAULT_MAX)
    keda = _load(record.keda_path)
    assert keda_problems(keda) == []
    replicas = replicas_for(spec, DEFAULT_MAX)
    assert (keda["spec"]["minReplicaCount"], keda["spec"]["maxReplicaCount"]) == (
        replicas.low,
        replicas.high,
    )
    assert keda["spec"]["pollingInterval"] == spec.poll_s
    if spec.min_replicas == 0:
        assert record.hpa_path is None and not (tmp_path / "hpa.yaml").exists()
        return
    hpa = _load(record.hpa_path)
    assert hpa_problems(hpa) == []
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (replicas.low, replicas.high)
    down = hpa["spec"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] == spec.window_s
    assert (
        keda["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        == hpa["spec"]["behavior"]
    )


def test_the_cases_cover_every_engine_and_kind() -> None:
    cases = _writable()
    assert {e for _, e in cases} == set(ENGINES)
    assert {p.split(",")[0].split(":")[0] for p, _ in cases} == {"reactive", "rate"}
    assert len(cases) >= 60


def test_the_manifest_has_the_controller_s_numbers(tmp_path: Path) -> None:
    """The simulation's clamp and the objects' min/max are the same numbers, default max too."""
    targets = _targets()
    for text in ("rate:min=3", "rate:min=2,max=5", "reactive:metric=kv,min=12"):
        spec = parse_policy(text)
        controller = Controller(spec, build_policy(spec, targets, 0.0), targets.max_replicas)
        record = write_manifests(tmp_path, spec, Target(deployment="x"), 3.0, targets.max_replicas)
        keda, hpa = _load(record.keda_path), _load(record.hpa_path)
        assert keda["spec"]["minReplicaCount"] == hpa["spec"]["minReplicas"] == controller.low
        assert keda["spec"]["maxReplicaCount"] == hpa["spec"]["maxReplicas"] == controller.high


def test_min_above_the_default_max_is_refused_by_both(tmp_path: Path) -> None:
    spec = parse_policy("rate:min=20")
    with pytest.raises(ConfigError, match=r"min=20 is above the default max \(12"):
        write_manifests(tmp_path, spec, Target(deployment="x"), 3.0, DEFAULT_MAX)
    with pytest.raises(ConfigError, match="min=20 is above"):
        Controller(spec, build_policy(spec, _targets(), 0.0), DEFAULT_MAX)


def _targets() -> Targets:
    return Targets(
        queue_per_replica=2.0, kv_per_replica=0.5, rate_per_replica=3.0, schedule=(1,) * 24,
        max_replicas=DEFAULT_MAX,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        ("rate:poll=0.4", "poll=0.4 s cannot be written: KEDA's pollingInterval"),
        ("rate:poll=30.5", "poll=30.5 s cannot be written"),
        ("rate:window=3601", "window=3601 s cannot be written"),
        ("rate:cooldown=0", "cooldown=0 s cannot be written"),
        ("rate:cooldown=1801", "HPA's scaleDown policy periodSeconds takes whole seconds"),
    ],
)
def test_timing_the_objects_cannot_carry_is_refused_at_parse(policy: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        parse_policy(policy)


def _written(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    record = write_manifests(
        tmp_path, parse_policy("rate:min=2"), Target(deployment="x"), 2.5, DEFAULT_MAX
    )
    return _load(record.keda_path), _load(record.hpa_path)


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("spec", "pollingInterval"), 0, "less than the minimum of 1"),
        (("spec", "minReplicaCount"), 50, "minReplicaCount must be less than or equal to max"),
        (("spec", "triggers", 0, "metadata", "threshold"), 2.5, "is not of type 'string'"),
        (("spec", "triggers", 0, "metadata", "threshold"), "lots", "not a number"),
        (("spec", "triggers"), [], "no triggers defined"),
        (("metadata", "name"), "x" * 60, "HPA name 'keda-hpa-"),
        (("metadata", "namespace"), "Prod_NS", "metadata.namespace 'Prod_NS': not a DNS-1123"),
        (("metadata", "namespace"), "n" * 64, "not a DNS-1123 label"),
        (("spec", "pollingIntervalSeconds"), 30, "'pollingIntervalSeconds' was unexpected"),
    ],
)
def test_the_keda_check_refuses_what_keda_refuses(
    tmp_path: Path, path: tuple[Any, ...], value: Any, words: str
) -> None:
    found = keda_problems(_broken(_written(tmp_path)[0], path, value))
    assert any(words in p for p in found), found


def test_cel_reads_keda_s_default_max_of_100(tmp_path: Path) -> None:
    keda = _broken(_written(tmp_path)[0], ("spec", "minReplicaCount"), 101)
    del keda["spec"]["maxReplicaCount"]
    found = keda_problems(keda)
    assert any(
        "minReplicaCount must be less than or equal to maxReplicaCount (CEL" in p for p in found
    ), found
    keda["spec"]["minReplicaCount"] = 100
    assert keda_problems(keda) == []


def _broken(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """`obj` with the value at `path` replaced by `value` (in place)."""
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("spec", "minReplicas"), 50, "must be greater than or equal to `minReplicas`"),
        (("spec", "minReplicas"), 0, "spec.minReplicas: must be greater than 0"),
        (("spec", "maxReplicas"), "9", "is not of type 'integer'"),
        (("spec", "behavior", "scaleDown", "stabilizationWindowSeconds"), 3601, "0..3600"),
        (("spec", "behavior", "scaleDown", "policies", 0, "periodSeconds"), 0, "1..1800"),
        (("spec", "behavior", "scaleUp", "policies", 1, "type"), "Replicas", "Unsupported"),
        (("spec", "metrics", 0, "pods", "target", "averageValue"), "0", "must be positive"),
        (("spec", "metrics", 0, "pods", "target", "averageValue"), "3.3.3", "must be positive"),
        (("spec", "metrics", 0, "type"), "Object", "must populate information"),
        (("spec", "scaleTargetRef", "name"), "a/b", "may not contain '/'"),
        (("metadata", "name"), "Vllm_Autoscale", "not a DNS-1123 subdomain"),
        (("metadata", "namespace"), "Prod_NS", "metadata.namespace 'Prod_NS': not a DNS-1123"),
        (("spec", "pollingInterval"), 30, "'pollingInterval' was unexpected"),
    ],
)
def test_the_hpa_check_refuses_what_the_api_server_refuses(
    tmp_path: Path, path: tuple[Any, ...], value: Any, words: str
) -> None:
    found = hpa_problems(_broken(_written(tmp_path)[1], path, value))
    assert any(words in p for p in found), found


def test_schedule_or_missing_metric_has_no_trigger(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no schedule metric"):
        write_manifests(tmp_path, parse_policy("schedule"), Target(deployment="x"), 1.0, 4)
    with pytest.raises(ConfigError, match="no reactive-kv metric for engine 'tgi'"):
        write_manifests(
            tmp_path, parse_policy("reactive:metric=kv"), Target(deployment="x", engine="tgi"), 1, 4
        )


def test_trigger_reads_the_engine_metric(tmp_path: Path) -> None:
    spec = parse_policy("reactive:metric=queue,min=2,max=9")
    target = Target(deployment="llm", namespace="serving", selector='job="vllm"')
    record = write_manifests(tmp_path, spec, target, 4.0, DEFAULT_MAX)
    keda, hpa = _load(record.keda_path), _load(record.hpa_path)
    trigger = keda["spec"]["triggers"][0]
    assert trigger["metadata"]["query"] == 'sum(vllm:num_requests_waiting{job="vllm"})'
    assert float(trigger["metadata"]["threshold"]) == 4.0
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "4"


def test_a_kind_is_registered_once() -> None:
    from planner.autoscale.policies import POLICIES, register_policy

    assert list(POLICIES) == ["reactive", "rate", "schedule"]
    with pytest.raises(ConfigError, match="policy kind 'rate' is registered already"):
        register_policy("rate", POLICIES["rate"])


@pytest.mark.parametrize(("window", "cooldown"), [(300, 60), (60, 600), (0, 1), (3600, 1800)])
def test_keda_scales_to_zero_no_sooner_than_the_simulated_controller(
    tmp_path: Path, window: int, cooldown: int
) -> None:
    """KEDA's cooldownPeriod is the wait after the last active poll before it scales to zero
    (KEDA's ScaledObject spec); the simulated controller reaches zero only when every
    recommendation in the window is zero and the cooldown has passed since its last scaling.
    Scaled up at the last active poll, the controller reaches zero one cooldownPeriod later,
    to the poll: with the policy's cooldown alone KEDA would drop to zero a window early,
    paying cold starts the study never counted."""
    spec = parse_policy(f"rate:min=0,poll=1,window={window},cooldown={cooldown}")
    controller = Controller(spec, build_policy(spec, _targets(), 0.0), DEFAULT_MAX)
    replicas, last_active_s, zero_s = 0, 100.0, None
    for now in range(0, 10_000):
        rate = 9.0 if now == last_active_s else 0.0
        m = Metrics(now_s=now, replicas=replicas, ready=replicas, waiting=0.0, kv_usage=0.0,
                    rate_rps=rate)  # fmt: skip
        replicas = controller.decide(m)
        if now > last_active_s and replicas == 0:
            zero_s = float(now)
            break
    assert zero_s is not None
    record = write_manifests(tmp_path, spec, Target(deployment="x"), 3.0, DEFAULT_MAX)
    keda_cooldown = _load(record.keda_path)["spec"]["cooldownPeriod"]
    assert abs((zero_s - last_active_s) - keda_cooldown) <= spec.poll_s
