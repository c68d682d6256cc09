"""Building the quarterly review: one plan per service (planner.capacity.plan), GPU pools, fleet
totals, capacity by hour, growth from the data, count intervals, risks, and the change since last
time.

`build_review` takes the validated review file and returns the typed Review; the only I/O is
reading each service's profile and limit (at the edge, through the project's own loaders).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import numpy as np

from contracts import __version__
from contracts.digest import sha256_of
from contracts.errors import InputError
from contracts.executor import LOCAL, ExecutorSpec
from contracts.finding import Finding
from contracts.jsonio import read_json, validate
from contracts.options import build
from contracts.plan import Plan
from contracts.review import (
    REVIEW_SCHEMA,
    ChangeStatus,
    FleetChange,
    FleetTotals,
    GpuPool,
    InputDigest,
    Review,
    ServiceChange,
    ServiceReview,
)
from planner.autoscale.run import autoscale_options, study_autoscaling
from planner.capacity.arithmetic import Limit, parse_limit
from planner.capacity.cost import gpu_hour_price, monthly_cost_usd
from planner.capacity.plan import PlanOptions, build_plan
from planner.review.certainty import (
    block_bootstrap_quantile,
    count_interval,
    limit_span,
    window_rates,
)
from planner.review.config import ReviewSpec, ServiceSpec
from planner.review.hourly import growth_trend, hourly_capacity, rule_count
from planner.review.risks import rank_risks, service_risks
from profiles.model import Profile, load_profile

WINDOW_SECONDS = {"1s": 1.0, "10s": 10.0, "60s": 60.0}

POOL_RULE = Finding(key="review.pool_rule")


def load_service_profile(spec: ServiceSpec, base: Path) -> Profile:
    """The service's profile: a JSON path, `preset:NAME`, `sample:NAME`, its logs profiled, or
    `prometheus:URL` (its engines' metrics, read with the service's `match`, `since`, ...)."""
    if spec.logs is not None:
        from profiles.build import build_profile

        return build_profile([str(base / p) for p in spec.logs])
    assert spec.profile is not None
    text = spec.profile
    if text.startswith("preset:"):
        from profiles.presets import preset_profile

        return preset_profile(text[7:])
    if text.startswith("sample:"):
        from profiles.build import build_profile
        from profiles.samples import sample_path

        return build_profile([str(sample_path(text[7:]))])
    if text.startswith("prometheus:"):
        from profiles.prometheus.build import PromSource, build_prometheus_profile

        m = spec.metrics
        return build_prometheus_profile(
            PromSource(url=text.removeprefix("prometheus:"), **m.model_dump()), seed=0
        )
    return load_profile(base / text)


def _limit(spec: ServiceSpec, base: Path) -> Limit:
    text = spec.limit
    candidate = base / text
    return parse_limit(
        str(candidate) if candidate.is_file() else text,
        spec.slo,
        accept_unconfirmed=spec.accept_unconfirmed,
        accept_hint="review it anyway with `accept_unconfirmed: true` in the service",
    )


def build_service(
    spec: ServiceSpec,
    profile: Profile,
    limit: Limit,
    review: ReviewSpec,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
    executor: ExecutorSpec = LOCAL,
) -> ServiceReview:
    """One service: its plan (user's growth, then the data's), hourly capacity, interval, risks."""
    clock = profile.arrivals.clock_hours
    trend = growth_trend(clock, review.confidence) if clock is not None else None
    growths: list[float] = []
    source = "none"
    if spec.growth is not None:
        growths.append(spec.growth)
        source = "given"
    if trend is not None:
        growths.append(round(trend.growth, 4))
        source = source if spec.growth is not None else "data"
    if not growths:
        growths = [1.0]
    # a value the plan refuses (a quantile of 0, a falling trend's growth) names the service
    options = build(
        PlanOptions,
        lambda path: f"{spec.name}: {path}",
        profile_path=spec.profile or ",".join(spec.logs or []),
        slo=spec.slo,
        peak_window=spec.peak_window,
        peak_quantile=spec.peak_quantile,
        growth=tuple(dict.fromkeys(growths)),
        headroom=spec.headroom,
        redundancy=spec.redundancy,
        gpu=spec.gpu,
        model=spec.model,
        tp=spec.tp,
        gpu_hour_price_usd=spec.gpu_hour_price_usd,
        fleet=review.fleet_check,
        seed=review.seed,
        name=spec.name,
        executor=executor,
    )
    plan = build_plan(profile, limit, options, progress=progress)
    if review.autoscale:
        study = study_autoscaling(
            profile, plan, autoscale_options(review.scale_up_delay_s, None, seed=review.seed)
        )
        plan = plan.model_copy(update={"autoscale": study})
    first = plan.scenarios[0]
    # req/s -> the limit's unit (Little's law with the plan's e2e for a concurrency limit).
    per_rps = 1.0 if first.unit == "rps" else (plan.demand.mean_e2e_s or 0.0)
    count = rule_count(
        first.growth, spec.headroom, spec.redundancy, first.per_instance_limit, per_rps
    )
    price = plan.inputs.gpu_hour_price_usd
    hourly = (
        hourly_capacity(clock, count, spec.tp, price, review.scale_up_delay_s)
        if clock is not None
        else None
    )
    window = WINDOW_SECONDS.get(spec.peak_window)
    rates = window_rates(profile, window) if window is not None else None
    replicates, block = (None, 0)
    if rates is not None and len(rates) >= 10:
        replicates, block = block_bootstrap_quantile(rates, spec.peak_quantile, rng)
    interval = count_interval(
        instances=first.instances,
        peak_replicates=replicates,
        peak_rps=plan.demand.peak_rps,
        limit=first.per_instance_limit,
        limit_span=limit_span(limit.result) if limit.result is not None else None,
        per_rps=per_rps,
        growth=first.growth,
        headroom=spec.headroom,
        redundancy=spec.redundancy,
        level=review.confidence,
        rng=rng,
        block_windows=block,
        predicted=limit.result is not None and limit.result.predicted is not None,
    )
    service = ServiceReview(
        name=spec.name,
        profile=spec.profile or ",".join(spec.logs or []),
        profile_digest=plan.inputs.profile_digest,
        limit=spec.limit,
        gpu=plan.resources.gpu,
        model=plan.inputs.model,
        tp=spec.tp,
        instances=first.instances,
        gpus=first.gpus,
        redundancy=spec.redundancy,
        monthly_cost_usd=first.monthly_cost_usd,
        gpu_hour_price_usd=price,
        peak_rps=plan.demand.peak_rps,
        per_instance_limit=first.per_instance_limit,
        unit=first.unit,
        growth=first.growth,
        growth_source=source,  # type: ignore[arg-type]
        count_interval=interval,
        hourly=hourly,
        trend=trend,
        risks=[],
        observed=plan.observed,
        plan=plan,
    )
    return service.model_copy(update={"risks": service_risks(service, profile, limit)})


def gpu_pools(services: list[ServiceReview]) -> list[GpuPool]:
    """Services summed per GPU type; spares per service (each keeps its N+k) and shared (the
    GPUs for load plus one pool of spares as large as the spares of the service that keeps the
    most, its k x TP GPUs; any spare GPU able to load any of the pool's models within the
    scale-up delay)."""
    pools: list[GpuPool] = []
    for gpu in sorted({s.gpu for s in services}):
        members = [s for s in services if s.gpu == gpu]
        spares = [s.redundancy * s.tp for s in members]
        gpus = sum(s.gpus for s in members)
        for_load = gpus - sum(spares)
        shared = max(spares)
        price = max(s.gpu_hour_price_usd for s in members)
        cost = sum(s.monthly_cost_usd for s in members)
        pools.append(
            GpuPool(
                gpu=gpu,
                services=[s.name for s in members],
                instances=sum(s.instances for s in members),
                gpus_for_load=for_load,
                spare_gpus_per_service=sum(spares),
                spare_gpus_shared=shared,
                gpus_per_service_spares=gpus,
                gpus_shared_spares=for_load + shared,
                gpu_hour_price_usd=price,
                monthly_cost_usd=cost,
                monthly_cost_shared_usd=cost - monthly_cost_usd(sum(spares) - shared, price),
                rule=POOL_RULE.english(),
                rule_finding=POOL_RULE,
            )
        )
    return pools


def fleet_totals(services: list[ServiceReview], pools: list[GpuPool]) -> FleetTotals:
    return FleetTotals(
        services=len(services),
        instances=sum(s.instances for s in services),
        gpus=sum(s.gpus for s in services),
        gpus_by_type={p.gpu: p.gpus_per_service_spares for p in pools},
        monthly_cost_usd=sum(s.monthly_cost_usd for s in services),
        gpus_shared_spares=sum(p.gpus_shared_spares for p in pools),
        monthly_cost_shared_usd=sum(p.monthly_cost_shared_usd for p in pools),
    )


def load_previous(path: Path) -> Review:
    """A previous review.json; InputError naming the file and field when it is not one."""
    return validate(Review, read_json(path, "review"), path, REVIEW_SCHEMA)


def _inputs(service: ServiceReview) -> tuple[dict[str, object], dict[str, object]]:
    """The plan's inputs without where the profile and limit were read from (their content
    stays: the profile's digest, the limit's value)."""
    inputs = service.plan.inputs
    return inputs.model_dump(exclude={"profile", "limit"}), inputs.limit.model_dump(
        exclude={"source"}
    )


def _status(service: ServiceReview, old: ServiceReview | None) -> ChangeStatus:
    """new (no such service last time), unchanged (the plan's inputs and its instances, GPUs
    and cost as before) or changed."""
    if old is None:
        return "new"
    same = (
        _inputs(service) == _inputs(old)
        and (service.instances, service.gpus) == (old.instances, old.gpus)
        and round(service.monthly_cost_usd, 2) == round(old.monthly_cost_usd, 2)
    )
    return "unchanged" if same else "changed"


def compare(review: Review, previous: Review) -> Review:
    """`review` with each service's and the fleet's change since `previous`."""
    old = {s.name: s for s in previous.services}
    services = []
    for s in review.services:
        o = old.get(s.name)
        change = ServiceChange(
            instances=s.instances - (o.instances if o else 0),
            gpus=s.gpus - (o.gpus if o else 0),
            monthly_cost_usd=s.monthly_cost_usd - (o.monthly_cost_usd if o else 0.0),
            status=_status(s, o),
        )
        services.append(s.model_copy(update={"change": change}))
    types = set(review.fleet.gpus_by_type) | set(previous.fleet.gpus_by_type)
    names = {s.name for s in review.services}
    fleet_change = FleetChange(
        previous_name=previous.name,
        instances=review.fleet.instances - previous.fleet.instances,
        gpus=review.fleet.gpus - previous.fleet.gpus,
        monthly_cost_usd=review.fleet.monthly_cost_usd - previous.fleet.monthly_cost_usd,
        gpus_by_type={
            t: review.fleet.gpus_by_type.get(t, 0) - previous.fleet.gpus_by_type.get(t, 0)
            for t in sorted(types)
        },
        removed_services=sorted(set(old) - names),
        new_services=sorted(names - set(old)),
    )
    return review.model_copy(update={"services": services, "change": fleet_change})


def _signed_usd(usd: float) -> str:
    """A change in dollars with its sign before the dollar sign: +$1,200, -$300, +$0."""
    return f"{'-' if round(usd) < 0 else '+'}${abs(usd):,.0f}"


def _sentence(fleet: FleetTotals, change: FleetChange | None) -> str:
    by_type = ", ".join(f"{n} x {g}" for g, n in fleet.gpus_by_type.items())
    services = "1 service needs" if fleet.services == 1 else f"{fleet.services} services need"
    instances = "instance" if fleet.instances == 1 else "instances"
    gpus = "GPU" if fleet.gpus == 1 else "GPUs"
    text = (
        f"{services} {fleet.instances} {instances} on {fleet.gpus} {gpus} "
        f"({by_type}), about ${fleet.monthly_cost_usd:,.0f} per month"
    )
    if change is not None:
        text += (
            f"; since {change.previous_name or 'the previous review'}: {change.instances:+d} "
            f"instances, {change.gpus:+d} GPUs, {_signed_usd(change.monthly_cost_usd)} per month"
        )
        text += "".join(f"; {part}" for part in _change_parts(change))
    return text + "."


def _change_parts(change: FleetChange) -> list[str]:
    """What the totals hide: services added and retired, GPUs per type that changed."""
    parts = []
    if change.new_services:
        parts.append("new: " + ", ".join(change.new_services))
    if change.removed_services:
        parts.append("retired: " + ", ".join(change.removed_services))
    by_type = [f"{g} {n:+d}" for g, n in change.gpus_by_type.items() if n]
    if by_type:
        parts.append("GPUs by type: " + ", ".join(by_type))
    return parts


def build_review(
    spec: ReviewSpec,
    review_path: Path,
    *,
    name: str,
    previous: Path | None = None,
    progress: Callable[[str], None] | None = None,
    profiles_out: dict[str, Profile] | None = None,
    executor: ExecutorSpec = LOCAL,
) -> Review:
    """The review of every service in `spec` (paths relative to the review file's folder).

    `profiles_out`, when given, receives each service's profile (for the PDF's workload page).
    `executor` says where each service's fleet-check points run (`planner.fleet.executor`).

    Raises InputError naming the service and the field when a profile, limit, GPU, model or
    SLO of a service cannot be used, or when `previous` is not a review.json.
    """
    base = review_path.parent
    rng = np.random.default_rng(spec.seed)
    old = load_previous(previous) if previous is not None else None
    services: list[ServiceReview] = []
    digests = [InputDigest(role="review", path=str(review_path), sha256=sha256_of(review_path))]
    for s in spec.services:
        if progress is not None:
            progress(f"service {s.name}: profile, limit, plan ...")
        field = "profile" if s.profile is not None else "logs"
        try:
            profile = load_service_profile(s, base)
            if profiles_out is not None:
                profiles_out[s.name] = profile
            field = "limit"
            limit = _limit(s, base)
            field = "gpu/model/slo"
            gpu_hour_price(s.gpu, s.gpu_hour_price_usd)
            services.append(build_service(s, profile, limit, spec, rng, progress, executor))
        except InputError as err:
            raise InputError(f"{review_path}: service {s.name!r}, field {field}: {err}") from err
        for role, given in (("profile", s.profile), ("limit", s.limit)):
            if given is not None and (base / given).is_file():
                digests.append(
                    InputDigest(role=f"{s.name}:{role}", path=given, sha256=sha256_of(base / given))
                )
        digests.append(
            InputDigest(
                role=f"{s.name}:profile-content",
                path=s.profile or "logs",
                sha256=services[-1].profile_digest,
            )
        )
    pools = gpu_pools(services)
    fleet = fleet_totals(services, pools)
    review = Review(
        schema=REVIEW_SCHEMA,
        name=spec.name or name,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        capplan_version=__version__,
        review_file=str(review_path),
        confidence=spec.confidence,
        scale_up_delay_s=spec.scale_up_delay_s,
        services=services,
        pools=pools,
        fleet=fleet,
        change=None,
        risks=rank_risks([r for s in services for r in s.risks]),
        inputs=digests,
        sentence="",
    )
    if old is not None and previous is not None:
        digests.append(InputDigest(role="previous", path=str(previous), sha256=sha256_of(previous)))
        review = compare(review.model_copy(update={"inputs": digests}), old)
    return review.model_copy(update={"sentence": _sentence(review.fleet, review.change)})


__all__ = ["Plan", "build_review", "compare", "fleet_totals", "gpu_pools"]
