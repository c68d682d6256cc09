"""Autoscaling policies by name, their option strings, and the HPA-like controller they run in.

A policy turns the fleet's metrics at one poll into a replica count; the `Controller` adds
what the Kubernetes HPA adds around it (tolerance, min/max, scale-down stabilisation window,
cooldown). Both simulations (request-level and per-step) drive the same controller, so a
policy means the same thing in each. Kinds live in one registry (`POLICIES`, filled by
`register_policy`, which refuses a duplicate): each kind owns its controller rule, its
per-replica target and the engine metric its manifests trigger on; an unknown kind or metric
lists the known ones.

The numbers the controller runs on are the ones the manifests carry: `check_writable` refuses
at parse time what a KEDA ScaledObject or an HPA cannot say (a poll under 1 s or of a
fraction of a second, a window over an hour, ...), and `replicas_for` is the one place the
replica range is resolved, for the controller and the manifests alike.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pydantic import ValidationError

from contracts.autoscale import PolicySpec
from contracts.errors import ConfigError
from contracts.names import NAME_FORM, is_registry_name
from profiles.prometheus.engines import ENGINES


@dataclass(frozen=True, kw_only=True)
class Metrics:
    """What the controller reads at one poll, fleet-wide (sums over ready replicas)."""

    now_s: float
    replicas: int  # every replica, loading ones included
    ready: int
    waiting: float  # requests queued (vllm:num_requests_waiting summed)
    kv_usage: float  # KV-cache usage fractions summed over ready replicas
    rate_rps: float  # requests per second over the last minute


@dataclass(frozen=True, kw_only=True)
class Targets:
    """Per-replica targets derived from the limit, for policies that do not give their own."""

    queue_per_replica: float
    kv_per_replica: float
    rate_per_replica: float
    schedule: tuple[int, ...]  # 24 replica counts, hour of day 0..23 (UTC)
    max_replicas: int
    day_offset_s: float = 0.0  # UTC second of day at simulated time 0


DEFAULT_MAX_PER_PLANNED = 2  # max_replicas when the policy gives none: 2 x the planned count
# What the objects accept, as their schemas and validators say: KEDA's CRD (pollingInterval
# minimum 1, int32) and the Kubernetes API server's HPA validation (stabilizationWindowSeconds
# 0..3600, a scaling policy's periodSeconds 1..1800).
_WHOLE_S = {
    "poll_s": ("poll", 1, 2**31 - 1, "KEDA's pollingInterval"),
    "window_s": ("window", 0, 3600, "the HPA's scaleDown stabilizationWindowSeconds"),
    "cooldown_s": ("cooldown", 1, 1800, "the HPA's scaleDown policy periodSeconds"),
}


@dataclass(frozen=True, kw_only=True)
class Replicas:
    """The replica range a policy runs in: the controller's clamp and the manifests' min/max."""

    low: int
    high: int


def default_max_replicas(planned: int) -> int:
    """max_replicas of a policy that gives none: twice the plan's instance count."""
    return DEFAULT_MAX_PER_PLANNED * planned


def replicas_for(spec: PolicySpec, default_max: int) -> Replicas:
    """The range of `spec`: its own min/max, max defaulting to `default_max`.

    Raises ConfigError when min is above the max (KEDA's CEL rule and the HPA's validation
    refuse such an object, and the simulation would have to clamp one of them).
    """
    high = spec.max_replicas or default_max
    if spec.min_replicas > high:
        given = (
            f"max={spec.max_replicas}"
            if spec.max_replicas
            else f"the default max ({default_max}: {DEFAULT_MAX_PER_PLANNED} x the plan)"
        )
        raise ConfigError(
            f"--autoscale-policy {spec.label}: min={spec.min_replicas} is above {given}; "
            f"give max={spec.min_replicas} or more, or a lower min"
        )
    return Replicas(low=spec.min_replicas, high=high)


def check_writable(spec: PolicySpec, where: str) -> None:
    """Raise ConfigError, naming `where` and the key, when a ScaledObject or an HPA cannot carry
    `spec`'s timing as it is: each of poll, window and cooldown is a whole number of seconds in
    the range its field accepts."""
    for field, (key, low, high, what) in _WHOLE_S.items():
        value = float(getattr(spec, field))
        if value != round(value) or not low <= value <= high:
            raise ConfigError(
                f"{where}: {key}={value:g} s cannot be written: {what} takes whole seconds "
                f"in {low}..{high}"
            )


class Policy(Protocol):
    """A replica recommendation from one poll's metrics (None: no change)."""

    def recommend(self, m: Metrics) -> int | None: ...


@dataclass(frozen=True)
class _Ratio:
    """HPA's AverageValue rule: ceil(fleet metric / per-replica target), within a tolerance."""

    read: Callable[[Metrics], float]
    target: float
    tolerance: float

    def recommend(self, m: Metrics) -> int | None:
        total = self.read(m)
        if m.replicas > 0 and abs(total / (self.target * m.replicas) - 1.0) <= self.tolerance:
            return None
        return math.ceil(total / self.target - 1e-9)


@dataclass(frozen=True)
class _Schedule:
    """The hour's count, asked for `lead_s` (the cold start) before the hour begins."""

    counts: tuple[int, ...]
    lead_s: float
    day_offset_s: float

    def recommend(self, m: Metrics) -> int | None:
        hour = int(((self.day_offset_s + m.now_s + self.lead_s) // 3600) % 24)
        return self.counts[hour]


_READ: dict[str, Callable[[Metrics], float]] = {
    "queue": lambda m: m.waiting,
    "kv": lambda m: m.kv_usage,
    "rate": lambda m: m.rate_rps,
}
# KV-cache usage gauges (a fraction 0..1) per engine; the queue and rate metrics come from
# the engine table the Prometheus reader uses.
KV_USAGE = {
    "vllm": "vllm:kv_cache_usage_perc",
    "vllm-v0": "vllm:gpu_cache_usage_perc",
    "sglang": "sglang:token_usage",
}


class PolicyKind(Protocol):
    """A kind of policy, registered by name: what it runs in the controller, its per-replica
    target, and the engine metric (and fleet PromQL) its manifests trigger on."""

    def build(self, spec: PolicySpec, targets: Targets, cold_start_s: float) -> Policy: ...

    def target(self, spec: PolicySpec, targets: Targets) -> float | None: ...

    def trigger(self, spec: PolicySpec, engine: str, selector: str) -> tuple[str, str] | None:
        """(metric name, PromQL over the fleet), None when `engine` has no such metric."""
        ...


class _ReactiveKind:
    """ceil(queue or KV usage / target): the HPA's AverageValue rule on an engine gauge."""

    def build(self, spec: PolicySpec, targets: Targets, cold_start_s: float) -> Policy:
        assert spec.metric is not None  # PolicySpec requires it for reactive
        return _Ratio(_READ[spec.metric], self.target(spec, targets), spec.tolerance)

    def target(self, spec: PolicySpec, targets: Targets) -> float:
        if spec.target is not None:
            return spec.target
        return targets.queue_per_replica if spec.metric == "queue" else targets.kv_per_replica

    def trigger(self, spec: PolicySpec, engine: str, selector: str) -> tuple[str, str] | None:
        waiting = ENGINES[engine].waiting
        name = (waiting[0] if waiting else None) if spec.metric == "queue" else KV_USAGE.get(engine)
        return None if name is None else (name, f"sum({name}{selector})")


class _RateKind:
    """ceil(request rate / target) on the engine's request counter."""

    def build(self, spec: PolicySpec, targets: Targets, cold_start_s: float) -> Policy:
        return _Ratio(_READ["rate"], self.target(spec, targets), spec.tolerance)

    def target(self, spec: PolicySpec, targets: Targets) -> float:
        return spec.target if spec.target is not None else targets.rate_per_replica

    def trigger(self, spec: PolicySpec, engine: str, selector: str) -> tuple[str, str] | None:
        name = ENGINES[engine].requests[0]
        return name, f"sum(rate({name}{selector}[1m]))"


class _ScheduleKind:
    """The hour of day's count, asked a cold start early; no metric, so no trigger."""

    def build(self, spec: PolicySpec, targets: Targets, cold_start_s: float) -> Policy:
        return _Schedule(targets.schedule, cold_start_s, targets.day_offset_s)

    def target(self, spec: PolicySpec, targets: Targets) -> float | None:
        return None

    def trigger(self, spec: PolicySpec, engine: str, selector: str) -> tuple[str, str] | None:
        return None


POLICIES: dict[str, PolicyKind] = {}


def register_policy(name: str, kind: PolicyKind) -> None:
    """Add a kind under `name`. Raises ConfigError when the name is taken or plan.json cannot
    hold it (not of contracts.names' form: lowercase words joined by underscores)."""
    if name in POLICIES:
        raise ConfigError(f"policy kind {name!r} is registered already")
    if not is_registry_name(name):
        raise ConfigError(f"policy kind {name!r}: plan.json cannot hold the name; use {NAME_FORM}")
    POLICIES[name] = kind


register_policy("reactive", _ReactiveKind())
register_policy("rate", _RateKind())
register_policy("schedule", _ScheduleKind())
DEFAULT_POLICIES = ("reactive:metric=queue", "reactive:metric=kv", "rate", "schedule")
_KEYS = {
    "metric": "metric",
    "target": "target",
    "window": "window_s",
    "cooldown": "cooldown_s",
    "poll": "poll_s",
    "min": "min_replicas",
    "max": "max_replicas",
    "tolerance": "tolerance",
    "name": "name",
}


def parse_policy(text: str) -> PolicySpec:
    """`KIND[:key=value,...]` as a PolicySpec, e.g. `reactive:metric=queue,target=4,min=2`.

    Keys: metric (queue|kv), target, window (s), cooldown (s), poll (s), min, max,
    tolerance, name. Raises ConfigError naming the option, the key and what was expected, also
    for timing a manifest cannot carry (`check_writable`) and a kv target outside (0, 1].
    """
    where = f"--autoscale-policy {text!r}"
    kind, _, rest = text.strip().partition(":")
    if kind not in POLICIES:
        raise ConfigError(f"{where}: unknown kind {kind!r}; known: {', '.join(POLICIES)}")
    fields: dict[str, str] = {"kind": kind}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in _KEYS:
            raise ConfigError(
                f"{where}: expected key=value with a key among {', '.join(_KEYS)}, got {item!r}"
            )
        fields[_KEYS[key.strip()]] = value.strip()
    if fields.get("metric") not in (None, "queue", "kv"):
        raise ConfigError(
            f"{where}: unknown metric {fields['metric']!r}; known: queue "
            f"({ENGINES['vllm'].waiting[0]}), kv ({KV_USAGE['vllm']})"
        )
    try:
        spec = PolicySpec.model_validate(fields)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "policy"
        msg = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}: {loc}: {msg}") from err
    check_writable(spec, where)
    _check_kv_target(spec, where)
    return spec


def _check_kv_target(spec: PolicySpec, where: str) -> None:
    """Raise ConfigError for a kv target above 1: KV-cache usage is a fraction of the cache
    (0..1 per replica), so the average never reaches such a target and the policy never
    scales up (the model's gt=0 refuses 0 and below)."""
    if spec.metric == "kv" and spec.target is not None and spec.target > 1:
        raise ConfigError(
            f"{where}: target={spec.target:g} for metric=kv: {KV_USAGE['vllm']} is a fraction "
            "of the KV cache in use (0..1 per replica), so a target above 1 never scales up; "
            "give a target in (0, 1], e.g. target=0.8"
        )


def policy_kind(spec: PolicySpec) -> PolicyKind:
    """The registered kind of `spec`. Raises ConfigError for an unknown kind."""
    try:
        return POLICIES[spec.kind]
    except KeyError as err:
        raise ConfigError(f"unknown policy {spec.kind!r}; known: {', '.join(POLICIES)}") from err


def target_of(spec: PolicySpec, targets: Targets) -> float | None:
    """The per-replica target `spec` runs at: its own, else the derived one (None: a schedule)."""
    return policy_kind(spec).target(spec, targets)


def build_policy(spec: PolicySpec, targets: Targets, cold_start_s: float) -> Policy:
    """The registered policy of `spec.kind`. Raises ConfigError for an unknown kind."""
    return policy_kind(spec).build(spec, targets, cold_start_s)


class Controller:
    """The HPA loop around a policy: clamp, scale up at once, scale down stabilised and cooled."""

    def __init__(self, spec: PolicySpec, policy: Policy, default_max: int) -> None:
        """Raises ConfigError when `spec`'s min is above its max (see `replicas_for`)."""
        self.spec = spec
        self.policy = policy
        replicas = replicas_for(spec, default_max)
        self.high = replicas.high
        self.low = replicas.low
        self._history: deque[tuple[float, int]] = deque()
        self._last_scale_s = -math.inf

    def decide(self, m: Metrics) -> int:
        """The replica count to hold after this poll."""
        raw = self.policy.recommend(m)
        wanted = m.replicas if raw is None else min(max(raw, self.low), self.high)
        self._history.append((m.now_s, wanted))
        while self._history and self._history[0][0] < m.now_s - self.spec.window_s:
            self._history.popleft()
        if wanted > m.replicas:
            self._last_scale_s = m.now_s
            return wanted
        stable = max(w for _, w in self._history)
        if stable < m.replicas and m.now_s - self._last_scale_s >= self.spec.cooldown_s:
            self._last_scale_s = m.now_s
            return max(stable, self.low)
        return m.replicas
