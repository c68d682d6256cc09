"""The alert lines of a plan: capacity, the load it was sized for, the queue and KV-cache usage
one instance showed at the limit, and the SLO's latency bounds and target.

Pure over the plan and, where the limit was measured by `capplan limit`, the limit run's
stages (`queue_and_kv_seen`): the highest requests-waiting and KV-usage gauges the server
reported during the stages of the level the limit rests on. Without them (a `--limit`
number, a server without those gauges) the queue line is the M/M/c mean queue at the
headroom's utilisation (as the autoscaling study's queue target, at most 95 %) and the KV
line the plan's own estimate at the limit's concurrency; each threshold says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contracts.errors import ConfigError
from contracts.limit import LimitLevel, LimitResult, load_limit
from contracts.ops import OpsThresholds, Threshold
from contracts.plan import Plan
from contracts.rundir import read_stages
from planner.autoscale.run import fleet_of
from planner.capacity.queueing import erlang_c
from planner.emulator.metrics import TTFT_BUCKETS_S
from planner.slo.recorded import plan_slo
from planner.slo.spec import Slo
from profiles.prometheus.engines import ENGINES

KV_CEILING = 0.99  # a usage line at 1.0 can never be crossed
MIN_QUEUE = 1.0  # alert on at least one request waiting, never on an empty queue
MAX_UTILISATION = 0.95  # no headroom: M/M/c's queue at utilisation 1 is unbounded


@dataclass(frozen=True, kw_only=True)
class Seen:
    """The highest gauges the limit run saw at the limit, with their names and where."""

    queue: float | None = None
    queue_name: str = ""
    kv: float | None = None
    kv_name: str = ""
    where: str = ""


def names(family: str) -> list[str]:
    """Every engine's metric names of `family` (an EngineMetrics field), first seen first."""
    seen: list[str] = []
    for engine in ENGINES.values():
        seen += [n for n in getattr(engine, family) if n not in seen]
    return seen


def latency_names(metric: str) -> list[str]:
    """Every engine's histogram names of a latency `metric` (ttft, tpot, e2e)."""
    seen: list[str] = []
    for engine in ENGINES.values():
        seen += [n for n in engine.latency_s.get(metric, ()) if n not in seen]
    return seen


def queue_and_kv_seen(limit_source: str) -> Seen:
    """The limit run's highest waiting and KV-usage gauges over the level the limit rests on;
    an empty `Seen` when `limit_source` is not a limit.json or its run kept no server gauges.
    Raises InputError for a limit.json or stages.json that exists but cannot be read."""
    path = Path(limit_source)
    if not path.exists():
        return Seen()
    limit = load_limit(path)
    level = _held_level(limit)
    if level is None:
        return Seen()
    run_dir = path if path.is_dir() else path.parent
    stages = {s.name: s for s in read_stages(run_dir)}
    gauges = [stages[n].server for n in (level.stages or [level.stage]) if n in stages]

    def highest(names: list[str]) -> tuple[float | None, str]:
        for name in names:
            values = [g[f"{name}:max"] for g in gauges if f"{name}:max" in g]
            if values:
                return max(values), name
        return None, ""

    queue, queue_name = highest(names("waiting"))
    kv, kv_name = highest(names("kv_usage"))
    where = f"{path} level {level.load:g} {limit.unit} ({', '.join(level.stages or [level.stage])})"
    return Seen(queue=queue, queue_name=queue_name, kv=kv, kv_name=kv_name, where=where)


def _held_level(limit: LimitResult) -> LimitLevel | None:
    load = limit.held_load if limit.held_load is not None else limit.feasible_max
    return next((lv for lv in limit.levels if lv.load == load), None)


def ops_thresholds(plan: Plan, seen: Seen) -> OpsThresholds:
    """The lines of `plan`. Raises ConfigError for a plan without an SLO."""
    slo = plan_slo(plan)
    if slo is None:
        raise ConfigError("the plan has no SLO: the latency and attainment alerts need one")
    limit = plan.inputs.limit
    serving = max(plan.instances - plan.inputs.redundancy, 1)
    capacity = serving * limit.value
    unit = "req/s" if limit.unit == "rps" else "requests in flight"
    quantile, bounds = _latency_bounds(slo)
    ttft = bounds.get("ttft")
    bucket = max((b for b in TTFT_BUCKETS_S if ttft is not None and b <= ttft), default=None)
    said = f"the SLO {slo.text}"
    return OpsThresholds(
        unit=limit.unit,
        capacity=Threshold(
            value=capacity,
            source=f"{serving} serving instances (the plan's {plan.instances} less "
            f"N+{plan.inputs.redundancy}) x the limit {limit.value:g} {unit} ({limit.source})",
        ),
        planned_load=Threshold(
            value=capacity / (1.0 + plan.inputs.headroom),
            source=f"the capacity / (1 + headroom {plan.inputs.headroom:g})",
        ),
        queue_per_instance=_queue(plan, seen),
        kv_usage=_kv(plan, seen),
        slo_quantile=quantile,
        ttft_s=None if ttft is None else Threshold(value=ttft, source=said),
        tpot_s=None if "tpot" not in bounds else Threshold(value=bounds["tpot"], source=said),
        attainment=None
        if bucket is None
        else Threshold(value=quantile, source=f"{said}: {quantile:g} of requests within it"),
        ttft_bucket_s=bucket,
    )


def _latency_bounds(slo: Slo) -> tuple[float, dict[str, float]]:
    """(the quantile, {metric: bound}) of a percentile SLO or an attainment SLO."""
    if slo.request_thresholds and slo.min_attainment is not None:
        return slo.min_attainment, {t.metric: t.threshold_s for t in slo.request_thresholds}
    quantiles = [c for c in slo.percentiles if c.quantile is not None and c.quantile < 1]
    if not quantiles:
        raise ConfigError(f"the SLO {slo.text!r} names no percentile or attainment to alert on")
    bounds = {c.metric: c.threshold_s for c in quantiles}
    return max(c.quantile or 0.0 for c in quantiles), bounds


def _queue(plan: Plan, seen: Seen) -> Threshold:
    if seen.queue is not None:
        return Threshold(
            value=max(seen.queue, MIN_QUEUE),
            source=f"the highest {seen.queue_name} at the limit, {seen.queue:g} ({seen.where})"
            + (f", at least {MIN_QUEUE:g}" if seen.queue < MIN_QUEUE else ""),
        )
    fleet = fleet_of(plan)
    rho = min(1.0 / (1.0 + plan.inputs.headroom), MAX_UTILISATION)
    a = fleet.slots * rho
    waiting = erlang_c(fleet.slots, a) * a / (fleet.slots - a)
    return Threshold(
        value=max(MIN_QUEUE, round(waiting, 1)),
        source="estimated (no server gauges at the limit): the M/M/c mean queue of one "
        f"instance's {fleet.slots} slots at {rho:.0%} utilisation (the headroom's, at most "
        f"{MAX_UTILISATION:.0%}), at least {MIN_QUEUE:g}",
    )


def _kv(plan: Plan, seen: Seen) -> Threshold:
    if seen.kv is not None:
        return Threshold(
            value=min(seen.kv, KV_CEILING),
            source=f"the highest {seen.kv_name} at the limit ({seen.where})",
        )
    memory = plan.resources.gpu_memory
    share = memory.kv_needed_tokens_at_limit / max(memory.kv_capacity_tokens, 1)
    return Threshold(
        value=min(share, KV_CEILING),
        source="estimated (no server gauges at the limit): the plan's KV tokens needed at the "
        f"limit's concurrency / the KV cache, at most {KV_CEILING:g}",
    )
