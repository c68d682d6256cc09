"""Building the capacity plan: demand, instance counts per growth scenario, resources, cost, checks.

`build_plan` is the one entry point `capplan plan` calls; it reads nothing from disk except
through the typed inputs it is given (the profile and the parsed limit), so tests call it
directly.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from contracts import __version__
from contracts.errors import ConfigError
from contracts.executor import LOCAL, ExecutorSpec
from contracts.finding import Finding
from contracts.limit import unconfirmed_reason, unit_label
from contracts.plan import (
    PLAN_SCHEMA,
    Checks,
    Demand,
    GpuMemory,
    Plan,
    PlanInputs,
    QueueingCheck,
    Resources,
    Scenario,
)
from planner.capacity.arithmetic import (
    HostRule,
    Limit,
    build_demand,
    demand_in_unit,
    plan_scenario,
    sensitivity,
)
from planner.capacity.cost import build_cost, gpu_hour_price
from planner.capacity.floor import check_floor
from planner.capacity.observed import observed_capacity
from planner.capacity.queueing import instances_by_queueing
from planner.engine import (
    EngineConfig,
    build_engine_config,
    kv_bytes_per_token,
    kv_capacity_tokens,
    weight_bytes,
)
from planner.engine.catalog import hf_config_path
from planner.engine.precision import precision_overrides
from planner.fleet.calibration import calibrate, measured_levels
from planner.fleet.check import fleet_check
from planner.fleet.routing import Routing, RoutingSettings
from planner.fleet.sim import ROUTINGS, closed_loop_run, open_loop_run, simulator_slo_problem
from planner.slo.spec import SloField
from profiles.model import Profile

SENSITIVITY_HEADROOMS = (0.0, 0.1, 0.2, 0.3, 0.5)
SENSITIVITY_GROWTHS = (1.0, 1.5, 2.0)
# Queueing target: a mean wait of at most 5 % of the e2e at the limit (a request barely queues).
QUEUE_WAIT_FRACTION = 0.05


class PlanOptions(BaseModel):
    """Every input of a plan besides the profile and the limit: each option's bound, default and
    meaning declared once here (the CLI builds it with `capplan.cli.build_options`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    profile_path: str = Field(description="the profile's file (or preset name)")
    # parsed where the text came in (the CLI, a review file)
    slo: SloField | None = Field(default=None, description="default: the limit's SLO")
    peak_window: str = Field(default="60s", description="window of the peak's rate")
    peak_quantile: float = Field(default=0.99, gt=0, le=1, description="quantile of the windows")
    peak_rps: float | None = Field(default=None, gt=0, description="planning peak, req/s")
    peak_users: float | None = Field(default=None, gt=0, description="peak concurrent requests")
    growth: tuple[Annotated[float, Field(gt=0)], ...] = Field(
        default=(1.0,), description="growth scenarios"
    )
    headroom: float = Field(default=0.2, ge=0, description="share above the peak")
    redundancy: int = Field(default=1, ge=0, description="spare instances (N+k)")
    gpu: str = "H100-80GB"
    model: str = "llama-3.1-8b"
    tp: int = Field(default=1, ge=1, description="tensor-parallel GPUs per instance")
    pp: int = Field(default=1, ge=1, description="pipeline stages: an instance holds tp x pp GPUs")
    quantization: str = Field(default="none", description="vLLM's --quantization")
    kv_cache_dtype: str = Field(default="auto", description="vLLM's --kv-cache-dtype")
    catalog: str | None = Field(
        default=None, description="a GPU/model catalog file extending the built-in one"
    )
    gpu_hour_price_usd: float | None = Field(default=None, gt=0)
    fleet: bool = Field(default=True, description="simulate the fleet")
    calibrate: bool = Field(default=True, description="fit the engine model to the limit.json")
    fleet_span_s: float = Field(
        default=300.0, gt=0, le=86400, description="simulated s per fleet size (at most a day)"
    )
    seed: int = 0
    host_rule: HostRule = Field(default_factory=HostRule)
    name: str = ""
    # build_engine_config overrides (a cal.json's factors)
    engine_overrides: dict[str, Any] = Field(default_factory=dict)
    # --routing: the routers to compare, the first one the count assumes (None: the check's
    # default pair, no comparison), and the prefix router's knobs.
    routings: tuple[Routing, ...] | None = None
    routing_settings: RoutingSettings = Field(default_factory=RoutingSettings)
    # Where the fleet check's points run, and whether a symmetric router's point may simulate
    # a few instances' share of the traffic (planner.fleet.sample) instead of all of them.
    executor: ExecutorSpec = LOCAL
    fleet_shortcut: bool = True

    @property
    def gpus_per_instance(self) -> int:
        """GPUs one instance holds: tp x pp."""
        return self.tp * self.pp

    def engine_config(self) -> EngineConfig:
        """The engine of one instance: GPU x model x tp x pp at the deployed precision, with
        the overrides (ConfigError for unknown names or a model that does not fit)."""
        return build_engine_config(
            self.gpu, self.model, self.tp, self.catalog, pp=self.pp,
            **precision_overrides(self.quantization, self.kv_cache_dtype),
            **self.engine_overrides,
        )  # fmt: skip


def mean_context_tokens(pairs: list[tuple[int, int]]) -> float:
    """Mean context of a request in flight, weighted by the time it holds its KV cache.

    A request of input i and output o holds i + k tokens during its k-th decode step, so over
    its o steps it holds sum(i + k) = i*o + o(o+1)/2 token-steps; divided by all steps:
    sum(i*o + o(o+1)/2) / sum(o). Longer requests are in flight longer, so this is above
    mean(input) + mean(output)/2.
    """
    table = np.asarray(pairs, dtype=float)
    if table.size == 0:
        raise ConfigError("the profile has no (input, output) sample pairs for the mean context")
    i, o = table[:, 0], table[:, 1]
    return float((i * o + o * (o + 1) / 2).sum() / o.sum())


def gpu_memory(config: EngineConfig, concurrency: float, context_tokens: float) -> GpuMemory:
    """Weights and KV cache per GPU at `concurrency` requests of `context_tokens` each."""
    capacity = kv_capacity_tokens(config)
    needed = concurrency * context_tokens
    return GpuMemory(
        capacity_bytes_per_gpu=config.gpu.memory_bytes,
        weights_bytes_per_gpu=weight_bytes(config),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token(config),
        kv_capacity_tokens=capacity,
        kv_needed_tokens_at_limit=needed,
        kv_headroom_frac=1.0 - needed / capacity if capacity else -math.inf,
        mean_context_tokens=context_tokens,
        concurrency_at_limit=concurrency,
    )


def simulated_e2e_s(profile: Profile, config: EngineConfig, rate_rps: float, seed: int) -> float:
    """Mean e2e of one simulated instance at `rate_rps` (120 s of the profile's traffic)."""
    run = open_loop_run(profile, config, rate_rps, 120.0, seed)
    keep = run.arrival_s >= 12.0
    return float(np.nanmean(run.e2e_s[keep]))


def closed_loop_e2e_s(
    profile: Profile, config: EngineConfig, users: float, seed: int, duration_s: float = 120.0
) -> float:
    """Mean e2e of one simulated instance holding `users` requests in flight (closed loop).

    Raises ConfigError when no request finishes in `duration_s`.
    """
    run = closed_loop_run(profile, config, max(1, round(users)), duration_s, seed)
    e2e = run.e2e_s[(run.arrival_s >= 0.1 * duration_s) & ~np.isnan(run.e2e_s)]
    if len(e2e) == 0:
        raise ConfigError(
            f"{users:g} users on one simulated {config.gpu.name} finished no request in "
            f"{duration_s:g} s; give a limit.json with a measured e2e"
        )
    return float(np.mean(e2e))


def _output_cv2(pairs: list[tuple[int, int]]) -> float:
    out = np.asarray([p[1] for p in pairs], dtype=float)
    return float(out.var() / out.mean() ** 2)


def build_plan(
    profile: Profile,
    limit: Limit,
    options: PlanOptions,
    progress: Callable[[str], None] | None = None,
    check_instances: Callable[[int], None] | None = None,
) -> Plan:
    """The plan for `profile`'s peak at `limit` per instance.

    `check_instances` sees the instance count as soon as it is known, before the fleet
    simulation, and may raise (the autoscaling policies' replica ranges depend on it).
    Raises ConfigError for inconsistent inputs (see planner.capacity), an unknown GPU or model,
    or a fleet check without an SLO to judge by.
    """
    if not options.growth:
        raise ConfigError("--growth needs at least one factor")
    if options.tp < 1:
        raise ConfigError(f"--tp must be >= 1, got {options.tp}")
    slo = options.slo if options.slo is not None else limit.slo
    config = options.engine_config()
    price, price_source = gpu_hour_price(config.gpu.name, options.gpu_hour_price_usd)
    pairs = profile.lengths.sampler.pairs
    notes: list[Finding] = []

    if limit.result is not None and unconfirmed_reason(limit.result) is not None:
        said = f"{limit.value:.4g} {unit_label(limit.unit)}"
        notes.append(Finding(key="note.limit_unconfirmed", values={"limit": said}))
    # e2e at the limit: measured (limit.json) or, for a bare number, simulated at the limit.
    e2e = limit.mean_e2e_s
    e2e_source = "measured at the limit (limit.json)"
    limit_rps = limit.value if limit.unit == "rps" else None
    if e2e is None:
        if limit_rps is not None:
            e2e = simulated_e2e_s(profile, config, limit_rps, options.seed)
        else:
            e2e = closed_loop_e2e_s(profile, config, limit.value, options.seed)
        e2e_source = f"simulated: one {config.gpu.name} instance of the engine model at the limit"
        notes.append(
            Finding(key="note.e2e_simulated", values={"e2e_s": e2e, "gpu": config.gpu.name})
        )

    demand = build_demand(
        profile,
        options.peak_window,
        options.peak_quantile,
        options.peak_rps,
        options.peak_users,
        e2e,
    )
    if e2e is not None:
        demand = demand.model_copy(update={"mean_e2e_source": e2e_source})
    peak = demand_in_unit(demand, limit.unit)
    scenarios = [
        plan_scenario(
            peak,
            limit.unit,
            limit.value,
            g,
            options.headroom,
            options.redundancy,
            options.gpus_per_instance,
            price,
        )
        for g in options.growth
    ]
    first = scenarios[0]
    if check_instances is not None:
        check_instances(first.instances)
    growths = sorted({*options.growth, *SENSITIVITY_GROWTHS})
    headrooms = sorted({*SENSITIVITY_HEADROOMS, options.headroom})
    cells = sensitivity(peak, limit.value, growths, headrooms, options.redundancy)

    # Memory at the limit's concurrency (Little's law for a rate limit).
    if limit.unit == "users":
        concurrency = limit.value
    else:
        assert e2e is not None  # a rate limit always gets an e2e above
        concurrency = limit.value * e2e
    memory = gpu_memory(config, concurrency, mean_context_tokens(pairs))
    if memory.kv_headroom_frac < 0:
        simulated = e2e_source.startswith("simulated") and limit.unit == "rps"
        notes.append(
            Finding(
                # With the engine model's own e2e, a shortfall says the model queues at the
                # limit given: it expects less of this GPU than the limit, not that the
                # measured instance ran short of KV.
                key="note.kv_short_simulated" if simulated else "note.kv_short",
                values={
                    "capacity": memory.kv_capacity_tokens,
                    "needed": memory.kv_needed_tokens_at_limit,
                    "e2e_s": e2e,
                    "limit_rps": limit.value,
                },
            )
        )
    rule = options.host_rule
    cores = rule.cpu_cores(options.gpus_per_instance)
    ram = rule.host_ram_gib(options.gpus_per_instance, config.gpu.memory_bytes)
    resources = Resources(
        instances=first.instances,
        tp=options.tp,
        pp=options.pp,
        gpus=first.gpus,
        gpu=config.gpu.name,
        gpu_memory=memory,
        cpu_cores_per_instance=cores,
        host_ram_gib_per_instance=ram,
        cpu_cores_total=cores * first.instances,
        host_ram_gib_total=ram * first.instances,
        rule=rule.describe(),
        rule_finding=rule.finding(),
    )

    checks = Checks(queueing=_queueing_check(profile, demand, first, concurrency, e2e, pairs))
    problem = simulator_slo_problem(slo) if slo is not None else None
    if options.fleet:
        if slo is None:
            notes.append(Finding(key="note.fleet_no_slo"))
        elif problem is not None:
            notes.append(Finding(key="note.fleet_slo_metrics", values=dict(problem.values)))
        else:
            fleet_config = config
            calibration = None
            if options.calibrate and limit.result is not None:
                if measured_levels(limit.result):
                    if progress is not None:
                        progress("calibrating the engine model to the measured levels ...")
                    fleet_config, cal = calibrate(
                        profile, config, limit.result, rng_seed=options.seed
                    )
                    calibration = cal.as_dict()
                    notes.append(
                        Finding(
                            key="note.calibrated"
                            + (
                                ""
                                if cal.limit_reproduced is None
                                else "_reproduces"
                                if cal.limit_reproduced
                                else "_misses"
                            ),
                            values={
                                "levels": cal.levels,
                                "mfu": cal.mfu,
                                "mbu": cal.mbu,
                                "overhead_ms": cal.step_overhead_s * 1e3,
                                "mean_err": cal.mean_rel_error,
                                "max_err": cal.max_rel_error,
                                "default_err": cal.default_mean_rel_error,
                                "metrics": ", ".join(cal.metrics),
                            },
                        )
                    )
                else:
                    notes.append(Finding(key="note.no_calibration"))
            # an SLO no instance count meets: say so, never "plan more instances"
            check_floor(fleet_config, profile, slo)
            checks.fleet = fleet_check(
                profile,
                fleet_config,
                demand.peak_rps * first.growth,
                first.instances,
                slo,
                options.fleet_span_s,
                rng_seed=options.seed,
                burst_factor=demand.burst_factor,
                progress=progress,
                routings=options.routings or ROUTINGS,
                settings=options.routing_settings,
                count_routers=options.routings is not None,
                shortcut=options.fleet_shortcut,
                executor=options.executor,
            )
            if calibration is not None:
                checks.fleet = checks.fleet.model_copy(update={"calibration": calibration})
    inputs = PlanInputs(
        profile=options.profile_path,
        profile_digest=profile.digest(),
        limit=limit.to_input(),
        slo=None if slo is None else slo.text,
        slo_terms=slo.terms() if slo is not None else [],
        peak_window=options.peak_window,
        peak_quantile=options.peak_quantile,
        peak_rps_given=options.peak_rps,
        peak_users_given=options.peak_users,
        growth=list(options.growth),
        headroom=options.headroom,
        redundancy=options.redundancy,
        gpu=config.gpu.name,
        # a config.json model stays its path, so verify rebuilds the same engine from the plan
        model=options.model if hf_config_path(options.model) else config.model.name,
        tp=options.tp,
        pp=options.pp,
        quantization=options.quantization,
        kv_cache_dtype=options.kv_cache_dtype,
        catalog=options.catalog,
        gpu_hour_price_usd=price,
        price_source=price_source,
        fleet_check=options.fleet,
        calibrate=options.calibrate,
        fleet_span_s=options.fleet_span_s,
        seed=options.seed,
        cpu_cores_per_gpu=options.host_rule.cpu_cores_per_gpu,
        host_ram_per_gpu_memory=options.host_rule.host_ram_per_gpu_memory,
    )
    observed = observed_capacity(profile, slo, limit_rps) if profile.groups else None
    if observed is not None and observed.contradicts_limit:
        missed, minutes = observed.missed_min_rps, observed.window_s / 60
        notes.append(
            Finding(
                key="note.observed_contradicts",
                values={"missed": missed, "minutes": minutes, "limit_rps": limit_rps},
            )
        )
    sentence = _sentence(first, demand, config, options, price)
    plan = Plan(
        schema=PLAN_SCHEMA,
        name=options.name,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        capplan_version=__version__,
        instances=first.instances,
        scenarios=scenarios,
        demand=demand,
        resources=resources,
        cost=build_cost(scenarios, price, price_source),
        checks=checks,
        sensitivity=cells,
        inputs=inputs,
        sentence=sentence.english()
        + (f" Fleet simulation: {checks.fleet.verdict}." if checks.fleet is not None else ""),
        notes=[note.english() for note in notes],
        sentence_finding=sentence,
        note_findings=notes,
        observed=observed,
    )
    return plan


def _queueing_check(
    profile: Profile,
    demand: Demand,
    first: Scenario,
    concurrency: float,
    e2e: float | None,
    pairs: list[tuple[int, int]],
) -> QueueingCheck | None:
    if e2e is None or concurrency <= 0:
        return None
    cv = profile.arrivals.interarrival_cv or 1.0
    ca2, cs2 = cv**2, _output_cv2(pairs)
    rate = demand.peak_rps * first.growth
    count = instances_by_queueing(rate, e2e, concurrency, ca2, cs2, QUEUE_WAIT_FRACTION * e2e)
    return QueueingCheck(
        method="M/G/c: Erlang-C with the Allen-Cunneen correction (ca² + cs²)/2, one server per "
        "request slot of the limit's concurrency",
        arrival_cv2=ca2,
        service_cv2=cs2,
        instances_poisson=count.instances_poisson,
        instances_bursty=count.instances_bursty,
        wait_probability=count.wait_probability,
        mean_wait_s=count.mean_wait_s,
        note=(
            f"{rate:.3g} req/s x {e2e:.3g} s e2e = {count.offered_erlangs:.1f} requests in "
            f"flight; {concurrency:.1f} slots per instance; target mean wait <= "
            f"{QUEUE_WAIT_FRACTION:.0%} of e2e; Poisson arrivals need {count.slots_poisson} "
            f"slots ({count.instances_poisson} instances), the measured arrival CV² "
            f"{ca2:.2f} needs {count.slots_bursty} ({count.instances_bursty} instances); "
            f"before headroom and the {first.redundancy} redundant instance(s); service CV² "
            f"from output lengths"
        ),
        slots_per_instance=concurrency,
        offered_erlangs=count.offered_erlangs,
        slots_poisson=count.slots_poisson,
        slots_bursty=count.slots_bursty,
        target_wait_s=count.target_wait_s,
    )


def _sentence(
    first: Scenario, demand: Demand, config: EngineConfig, options: PlanOptions, price: float
) -> Finding:
    return Finding(
        key="plan.sentence",
        values={
            "instances": first.instances,
            "model": config.model.name,
            "gpu": config.gpu.name,
            "tp": options.tp * options.pp,  # GPUs an instance holds: "{gpu} x {tp}"
            "gpus": first.gpus,
            "monthly_usd": first.monthly_cost_usd,
            "price": price,
            "peak_rps": demand.peak_rps,
            "peak_definition": demand.peak_definition,
            "growth": first.growth,
            "headroom": options.headroom,
            "redundancy": options.redundancy,
        },
    )
