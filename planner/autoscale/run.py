"""The autoscaling study of a plan: every policy and the static count over the profile's trace.

`study_autoscaling` is what `capplan plan --autoscale` calls after the plan is built: it
reads the plan's limit, e2e, memory and sizing rule, rebuilds the profile's arrival rate
step by step (`trace.py`), runs the per-step queue model (`fluid.py`) once for the static
count and once per policy, and recommends the cheapest policy that meets the target
attainment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contracts.autoscale import AutoscaleResult, PolicyOutcome, PolicySpec
from contracts.errors import ConfigError
from contracts.plan import Plan
from planner.autoscale.fluid import StepRun, simulate_steps
from planner.autoscale.outcome import Costing, outcome
from planner.autoscale.policies import (
    DEFAULT_POLICIES,
    Controller,
    Targets,
    build_policy,
    default_max_replicas,
    parse_policy,
    replicas_for,
    target_of,
)
from planner.autoscale.trace import Trace, build_trace
from planner.capacity.arithmetic import instances_for_load
from planner.capacity.queueing import erlang_c
from planner.slo.recorded import plan_slo
from planner.slo.spec import Slo
from profiles.model import Profile

DEFAULT_COLD_START_S = 240.0
STEP_S = 60.0
NO_TTFT_WAIT_FRACTION = 0.05  # as the plan's queueing check: a wait of 5 % of the e2e
FLUID_ERROR = "measured against the request-level simulation by bench/autoscale_speed.py --check"


@dataclass(frozen=True, kw_only=True)
class AutoscaleOptions:
    """The study's inputs besides the plan and the profile (validated by `autoscale_options`)."""

    cold_start_s: float = DEFAULT_COLD_START_S
    policies: tuple[PolicySpec, ...] = ()
    step_s: float = STEP_S
    seed: int = 0

    def check_replicas(self, planned: int) -> None:
        """Raise ConfigError when a policy's min is above its max at a plan of `planned`
        instances (the default max is 2 x the plan): called once the count is known, before
        any simulation."""
        for spec in self.policies:
            replicas_for(spec, default_max_replicas(planned))


def autoscale_options(
    cold_start_s: float, policies: list[str] | None, seed: int = 0
) -> AutoscaleOptions:
    """The options from `--cold-start` and `--autoscale-policy` texts (default: all four).

    Raises ConfigError for a negative cold start or a bad policy.
    """
    if not math.isfinite(cold_start_s) or cold_start_s < 0:
        raise ConfigError(f"--cold-start must be a duration >= 0, got {cold_start_s}")
    specs = tuple(parse_policy(t) for t in policies or DEFAULT_POLICIES)
    labels = [s.label for s in specs]
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise ConfigError(
            f"--autoscale-policy: {', '.join(repeated)} given twice; tell them apart with name=..."
        )
    return AutoscaleOptions(cold_start_s=cold_start_s, policies=specs, seed=seed)


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """One instance as the queue models see it, and the plan's sizing rule."""

    slots: int
    service_s: float
    per_instance_rps: float
    kv_at_limit: float  # KV-cache usage fraction at the limit's concurrency
    headroom: float
    redundancy: int
    static: int

    def needed(self, rate_rps: float) -> int:
        """The plan's rule for one rate: ceil(rate x (1 + headroom) / limit) + redundancy."""
        if rate_rps <= 0:
            return self.redundancy
        return instances_for_load(rate_rps, self.per_instance_rps, self.headroom) + self.redundancy

    def queue_target(self) -> float:
        """Requests waiting per replica at the headroom's utilisation (M/M/c), at least 1."""
        a = self.slots / (1.0 + self.headroom)
        lq = erlang_c(self.slots, a) * a / (self.slots - a)
        return max(1.0, round(lq, 1))


def fleet_of(plan: Plan) -> Fleet:
    """The instance model of `plan`. Raises ConfigError when the plan has no e2e at the limit."""
    e2e = plan.demand.mean_e2e_s
    if e2e is None or e2e <= 0:
        raise ConfigError("--autoscale needs the e2e at the limit (give a limit.json or --limit)")
    limit, memory = plan.inputs.limit, plan.resources.gpu_memory
    if limit.unit == "rps":
        slots = max(1, round(limit.value * e2e))
        rate, service = limit.value, slots / limit.value
    else:
        slots = max(1, round(limit.value))
        rate, service = slots / e2e, e2e
    kv_frac = memory.kv_needed_tokens_at_limit / max(memory.kv_capacity_tokens, 1)
    return Fleet(
        slots=slots,
        service_s=service,
        per_instance_rps=rate,
        kv_at_limit=min(1.0, kv_frac),
        headroom=plan.inputs.headroom,
        redundancy=plan.inputs.redundancy,
        static=plan.instances,
    )


def slo_terms(slo: Slo | None, service_s: float) -> tuple[float, float, str]:
    """(wait budget, target attainment, the rule in words) from the SLO's TTFT goal."""
    goal = slo.ttft_goal if slo is not None else None
    if goal is not None:
        budget, target = goal
    else:
        budget, target = NO_TTFT_WAIT_FRACTION * service_s, 0.99
    rule = (
        f"a request is good when it waits at most {budget:.3g} s for a free slot "
        f"({'the SLO TTFT bound' if goal else '5 % of the e2e: no TTFT bound'}); "
        f"target attainment {target:.3g}"
    )
    return budget, target, rule


def _targets(fleet: Fleet, trace: Trace, high: int) -> Targets:
    hod = trace.hour_of_day()
    schedule = tuple(
        fleet.needed(float(trace.rate_rps[hod == h].max(initial=0.0))) for h in range(24)
    )
    return Targets(
        queue_per_replica=fleet.queue_target(),
        kv_per_replica=fleet.kv_at_limit / (1.0 + fleet.headroom),
        rate_per_replica=fleet.per_instance_rps / (1.0 + fleet.headroom),
        schedule=schedule,
        max_replicas=high,
        day_offset_s=trace.day_offset_s,
    )


def study_autoscaling(profile: Profile, plan: Plan, options: AutoscaleOptions) -> AutoscaleResult:
    """Every policy of `options` and the static plan over `profile`'s trace at the plan's growth.

    Raises ConfigError for a plan without an e2e or a profile without a rate series.
    """
    fleet = fleet_of(plan)
    rng = np.random.default_rng(options.seed)
    trace = build_trace(profile, options.step_s, plan.scenarios[0].growth, rng)
    budget, target, rule = slo_terms(plan_slo(plan), fleet.service_s)
    costing = Costing(
        tp=plan.inputs.tp,
        gpu_hour_price_usd=plan.inputs.gpu_hour_price_usd,
        cold_start_s=options.cold_start_s,
        target_attainment=target,
    )
    targets = _targets(fleet, trace, default_max_replicas(fleet.static))

    def steps(initial: int, controller: Controller | None) -> StepRun:
        return simulate_steps(
            trace.rate_rps,
            step_s=trace.step_s,
            service_s=fleet.service_s,
            slots=fleet.slots,
            initial=initial,
            controller=controller,
            cold_start_s=options.cold_start_s,
            wait_budget_s=budget,
            kv_per_slot=fleet.kv_at_limit / fleet.slots,
        )

    static_run = steps(fleet.static, None)
    static = outcome("static", None, trace, static_run, costing, None)
    outcomes: list[PolicyOutcome] = []
    for spec in options.policies:
        controller = Controller(
            spec, build_policy(spec, targets, options.cold_start_s), targets.max_replicas
        )
        first = min(max(fleet.needed(float(trace.rate_rps[0])), controller.low), controller.high)
        run = steps(first, controller)
        outcomes.append(
            outcome(
                spec.label, spec, trace, run, costing, static.gpu_hours, target_of(spec, targets)
            )
        )
    best, reason = recommend(outcomes, target)
    return AutoscaleResult(
        cold_start_s=options.cold_start_s,
        horizon_s=trace.horizon_s,
        step_s=trace.step_s,
        trace=trace.how,
        model=(
            f"per-step M/M/c queue with a fluid backlog ({trace.step_s:g} s steps, "
            f"{fleet.slots} slots of {fleet.service_s:.3g} s per instance); {FLUID_ERROR}"
        ),
        good_rule=rule,
        wait_budget_s=budget,
        target_attainment=target,
        slots_per_instance=fleet.slots,
        service_s=fleet.service_s,
        per_instance_rps=fleet.per_instance_rps,
        bursts=len(trace.burst_starts_s),
        static=static,
        policies=outcomes,
        recommended=best,
        recommended_reason=reason,
    )


def recommend(outcomes: list[PolicyOutcome], target: float) -> tuple[str, str]:
    """The cheapest policy that meets `target`; with none, the one with the best attainment."""
    meeting = [o for o in outcomes if o.meets_target]
    if meeting:
        best = min(meeting, key=lambda o: o.gpu_hours)
        return best.label, (
            f"the fewest GPU-hours ({best.cost_vs_static:.0%} of the static plan's) among the "
            f"{len(meeting)} policies that reach {target:.3g} attainment"
        )
    best = max(outcomes, key=lambda o: o.attainment)
    return best.label, (
        f"no policy reaches {target:.3g} attainment; {best.label} comes closest "
        f"({best.attainment:.3g})"
    )


def why_not(policy: PolicyOutcome, result: AutoscaleResult) -> str:
    """Why `policy` is not the recommended one, in one clause for the console: below the
    target, or meeting it at more GPU-hours than the recommended policy. A policy that
    scales up more than once an hour on average is said to flap, with the queue rule's
    cause when it reads the queue: ceil(waiting / target) asks for min_replicas whenever
    nothing waits, so it scales down between bursts and pays the cold start again."""
    best = next((o for o in result.policies if o.label == result.recommended), None)
    if policy.meets_target and best is not None:
        clause = (
            f"meets the target at {policy.cost_vs_static:.1%} of the static GPU-hours, "
            f"{best.label} at {best.cost_vs_static:.1%}"
        )
    else:
        clause = (
            f"{policy.attainment:.1%} attainment, below the {result.target_attainment:.3g} target"
        )
    hours = result.horizon_s / 3600.0
    if hours > 0 and policy.scale_ups > hours and policy.spec is not None:
        low = policy.spec.min_replicas
        clause += (
            f"; it flaps: {policy.scale_ups} scale-ups in {hours:.0f} hours between {low} and "
            f"{policy.max_instances} replicas, each paying the {result.cold_start_s:g} s cold start"
        )
        if policy.spec.metric == "queue":
            clause += " (a queue target asks for the fewest replicas whenever nothing waits)"
    return clause


def manifest_policy(result: AutoscaleResult) -> PolicyOutcome:
    """The policy the manifests are written for: the recommended one if a metric drives it,
    else the metric-driven policy `recommend` picks among the rest.

    Raises ConfigError when every policy studied is a schedule.
    """
    metric = [o for o in result.policies if o.spec is not None and o.spec.kind != "schedule"]
    if not metric:
        raise ConfigError("no metric-driven policy studied: add one to write KEDA/HPA manifests")
    chosen = next((o for o in metric if o.label == result.recommended), None)
    if chosen is None:
        label, _ = recommend(metric, result.target_attainment)
        chosen = next(o for o in metric if o.label == label)
    return chosen
