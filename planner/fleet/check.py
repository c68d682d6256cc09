"""The plan's fleet check: the planned peak simulated against n-1, n and n+1 instances.

`fleet_check` draws the profile's traffic once (`planner.fleet.traffic`, with one 10 s window at
the profile's burst factor), replays it against each fleet size and routing
(`planner.fleet.sim.simulate_fleet`) and judges each with the limit search's verdict
(`planner.fleet.sim.judge`). `single_instance_limit` bisects the highest rate one simulated
instance carries within an SLO.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from contracts.finding import Finding, FindingValue
from contracts.plan import FleetCheck, FleetPoint, RouterCount
from planner.engine import EngineConfig
from planner.fleet.routing import Routing, RoutingSettings
from planner.fleet.sim import ROUTINGS, judge, open_loop_run, simulate_fleet
from planner.fleet.traffic import ArrivalKind, BurstWindow, arrival_cv, profile_requests
from planner.slo.spec import Slo
from profiles.model import Profile

BURST_WINDOW_S = 10.0


def fleet_check(
    profile: Profile,
    config: EngineConfig,
    rate_rps: float,
    instances: int,
    slo: Slo,
    duration_s: float,
    rng_seed: int = 0,
    warmup_frac: float = 0.1,
    routings: Sequence[Routing] = ROUTINGS,
    arrival_kind: ArrivalKind = "gamma",
    burst_factor: float | None = None,
    progress: Callable[[str], None] | None = None,
    settings: RoutingSettings | None = None,
    count_routers: bool = False,
) -> FleetCheck:
    """Simulate the planned peak against n-1, n and n+1 instances under each routing.

    The same requests (one seeded draw) go to every fleet size and routing, so the points
    differ only in the fleet. With `burst_factor` > 1, one 10 s window starting at 40 % of
    the span runs at that multiple of the rate (the profile's 10 s peak over its planning
    peak), so the verdict includes a burst. With `count_routers`, each routing's fewest
    instances meeting the SLO is searched (`router_counts`) and the first routing is the one
    the plan's count assumes. Raises ConfigError for a non-positive rate or duration.
    """
    wall0 = time.perf_counter()
    rng = np.random.default_rng(rng_seed)
    burst = None
    if burst_factor is not None and burst_factor > 1.0:
        burst = BurstWindow(
            start_s=0.4 * duration_s,
            duration_s=min(BURST_WINDOW_S, 0.5 * duration_s),
            factor=burst_factor,
        )
    requests = profile_requests(
        profile,
        rate_rps,
        duration_s,
        rng,
        config.effective_max_model_len,
        arrival_kind,
        burst,
        block_tokens=config.block_tokens,
    )
    warmup_s = duration_s * warmup_frac
    points: list[FleetPoint] = []
    simulated = 0.0

    def point(size: int, routing: Routing) -> FleetPoint:
        nonlocal simulated
        run = simulate_fleet(requests, config, size, routing, settings)
        simulated += run.simulated_s
        verdict = judge(run, slo, warmup_s)
        if progress is not None:
            progress(
                f"fleet n={size} {routing}: attainment {verdict.attainment:.1%}, "
                f"{'meets' if verdict.meets_slo else 'misses'} the SLO ({run.wall_s:.1f} s wall)"
            )
        return FleetPoint(
            instances=size,
            routing=routing,
            attainment=verdict.attainment,
            ttft_p95_s=verdict.ttft_p95_s,
            tpot_p95_s=verdict.tpot_p95_s,
            e2e_p95_s=verdict.e2e_p95_s,
            meets_slo=verdict.meets_slo,
            requests=verdict.requests,
            prefix_hit_ratio=run.prefix_hit_ratio,
        )

    for size in sorted({max(1, instances - 1), instances, instances + 1}):
        points.extend(point(size, routing) for routing in routings)
    ideal = profile.prefix.ideal_hit_ratio
    routers = router_counts(points, point, instances, routings, ideal) if count_routers else []
    # When n+1 still fails, look further up (least-outstanding routing) for the fewest
    # instances that meet the SLO, up to twice the plan.
    needed = min_instances_meeting(points)
    size = instances + 2
    while needed is None and size <= max(2 * instances, instances + 2) and not count_routers:
        extra = point(size, "least_outstanding")
        points.append(extra)
        if extra.meets_slo:
            needed = size
        size += 1
    verdict = fleet_verdict(points, instances)
    return FleetCheck(
        simulated_s=duration_s,
        rate_rps=rate_rps,
        points=points,
        min_instances_meeting=needed,
        verdict=verdict.english(),
        verdict_finding=verdict,
        wall_s=time.perf_counter() - wall0,
        slo=slo.text,
        arrivals=(
            f"{arrival_kind} renewal process at {rate_rps:.4g} req/s, inter-arrival CV "
            f"{arrival_cv(profile, arrival_kind):.3g}; lengths drawn from the profile's "
            f"{len(profile.lengths.sampler.pairs)} sample pairs; seed {rng_seed}; first "
            f"{warmup_s:g} s left out as warm-up"
            + (
                ""
                if burst is None
                else f"; a {burst.duration_s:g} s burst at {burst.factor:.3g}x the rate from "
                f"t={burst.start_s:g} s"
            )
        ),
        engine=(
            f"{config.gpu.name} x {config.model.name} tp={config.tp}, mfu {config.mfu:.3g}, "
            f"mbu {config.mbu:.3g}, step overhead {config.step_overhead_s * 1e3:.3g} ms "
            f"({config.calibration_source})"
        ),
        ideal_prefix_hit_ratio=ideal,
        routers=routers,
        assumed_routing=routings[0] if count_routers else None,
        prefix_threshold=(settings or RoutingSettings()).prefix_threshold
        if "prefix_aware" in routings
        else None,
    )


def router_counts(
    points: list[FleetPoint],
    point: Callable[[int, Routing], FleetPoint],
    instances: int,
    routings: Sequence[Routing],
    ideal: float | None,
) -> list[RouterCount]:
    """Each routing's fewest instances meeting the SLO, simulating more sizes as needed.

    From the n-1, n and n+1 points already in `points`: while the smallest size simulated
    meets the SLO, the next smaller one is simulated (down to 1); while none meets it, the
    next larger one (up to 2n). New points are appended to `points`. Each hit ratio at n is
    also given as a share of the profile's `ideal` one.
    """
    limit = max(2 * instances, instances + 2)
    out = []
    for routing in routings:

        def mine() -> list[FleetPoint]:
            return [p for p in points if p.routing == routing]  # noqa: B023

        while min_instances_meeting(mine()) == min(p.instances for p in mine()) > 1:
            points.append(point(min(p.instances for p in mine()) - 1, routing))
        while min_instances_meeting(mine()) is None and max(p.instances for p in mine()) < limit:
            points.append(point(max(p.instances for p in mine()) + 1, routing))
        at_n = [p.prefix_hit_ratio for p in mine() if p.instances == instances]
        hit = at_n[0] if at_n else None
        out.append(
            RouterCount(
                routing=routing,
                min_instances_meeting=min_instances_meeting(mine()),
                searched_up_to=max(p.instances for p in mine()),
                prefix_hit_ratio=hit,
                ideal_share=hit / ideal if hit is not None and ideal else None,
            )
        )
    points.sort(key=lambda p: (p.instances, routings.index(p.routing)))
    return out


def min_instances_meeting(points: Sequence[FleetPoint]) -> int | None:
    """The fewest simulated instances meeting the SLO under some routing, when more also do."""
    sizes = sorted({p.instances for p in points})
    meeting = {p.instances for p in points if p.meets_slo}
    for k, size in enumerate(sizes):
        if all(s in meeting for s in sizes[k:]):
            return size
    return None


def fleet_verdict(points: Sequence[FleetPoint], instances: int) -> Finding:
    """One sentence: does n meet the SLO under every routing, and does n-1 fall short?"""

    def meets(size: int) -> bool | None:
        got = [p.meets_slo for p in points if p.instances == size]
        return all(got) if got else None

    at_n, below = meets(instances), meets(instances - 1)
    if at_n is None:
        return Finding(key="fleet.not_simulated", values={"instances": instances})
    if not at_n:
        best = [p.routing for p in points if p.instances == instances and p.meets_slo]
        needed = min_instances_meeting(points)
        key = (
            "fleet.short" + ("_routing" if best else "") + ("_needs" if needed is not None else "")
        )
        values: dict[str, FindingValue] = {"instances": instances, "needed": needed}
        if best:
            values["routings"] = ", ".join(best)
        return Finding(key=key, values=values)
    if below is None:
        return Finding(key="fleet.meets", values={"instances": instances})
    key = "fleet.meets_with_spare" if below else "fleet.meets_tight"
    return Finding(key=key, values={"instances": instances, "below": instances - 1})


def single_instance_limit(
    profile: Profile,
    config: EngineConfig,
    slo: Slo,
    duration_s: float,
    rng_seed: int = 0,
    rel_tol: float = 0.02,
    arrival_kind: ArrivalKind = "gamma",
) -> float:
    """The highest rate (req/s) one simulated instance carries within `slo`, by bisection.

    Each probe replays the profile's traffic at a rate for `duration_s` (10 % warm-up left out).
    Raises RunError when even a tiny rate fails the SLO.
    """
    from contracts.errors import RunError

    def meets(rate: float) -> bool:
        run = open_loop_run(profile, config, rate, duration_s, rng_seed, arrival_kind)
        return judge(run, slo, 0.1 * duration_s).meets_slo

    lo, hi = 0.0, 1.0
    while meets(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e5:
            raise RunError("the simulated instance meets the SLO at any rate tried (> 1e5 req/s)")
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2.0
        if meets(mid):
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        raise RunError(f"one simulated instance fails the SLO {slo.text!r} even at {hi:.3g} req/s")
    return lo
