"""The plan's fleet check: the planned peak simulated against n-1, n and n+1 instances.

`fleet_check` draws the profile's traffic once (`planner.fleet.traffic`, with one 10 s window at
the profile's burst factor), replays it against each fleet size and routing
(`planner.fleet.sim.simulate_fleet`) and judges each with the limit search's verdict
(`planner.fleet.sim.judge`). `single_instance_limit` bisects the highest rate one simulated
instance carries within an SLO.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence

import numpy as np

from contracts.executor import LOCAL, ExecutorSpec
from contracts.finding import Finding, FindingValue
from contracts.plan import FleetCheck, FleetPoint, RouterCount
from planner.engine import EngineConfig
from planner.fleet.estimate import estimate_check
from planner.fleet.pool import FleetJob, FleetPool, Measured, workers_wanted
from planner.fleet.routing import Routing, RoutingSettings
from planner.fleet.sim import ROUTINGS, judge, open_loop_run
from planner.fleet.traffic import ArrivalKind, BurstWindow, arrival_cv, draw_traffic
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
    shortcut: bool = True,
    executor: ExecutorSpec = LOCAL,
) -> FleetCheck:
    """Simulate the planned peak against n-1, n and n+1 instances under each routing.

    The same requests (one seeded draw) go to every fleet size and routing, so the points
    differ only in the fleet. With `burst_factor` > 1, one 10 s window starting at 40 % of
    the span runs at that multiple of the rate (the profile's 10 s peak over its planning
    peak), so the verdict includes a burst. With `count_routers`, each routing's fewest
    instances meeting the SLO is searched (`router_counts`) and the first routing is the one
    the plan's count assumes, the only one simulated at n-1 and n+1. Points run side by side
    on the cores when there are many requests (`planner.fleet.pool`). With `shortcut`, a
    point under a router that treats instances alike simulates a few instances' share of the
    traffic where its bound holds (`planner.fleet.sample`; the point's `sampled_instances`);
    without, every instance. `executor` says where the points run (`planner.fleet.executor`).
    Before the first points, the check's cost is estimated from a timed probe and reported to
    `progress` (`planner.fleet.estimate`). Raises ConfigError for
    a non-positive rate or duration.
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
    traffic = draw_traffic(
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

    def reported(got: Measured) -> None:
        if progress is not None:
            p = got.point
            progress(
                f"fleet n={p.instances} {p.routing}: attainment {p.attainment:.1%}, "
                f"{'meets' if p.meets_slo else 'misses'} the SLO ({got.wall_s:.1f} s wall"
                + (
                    ""
                    if p.sampled_instances is None
                    else f", {p.sampled_instances} of {p.instances} instances simulated"
                )
                + ("" if p.settled else ", unsettled: the search's sub-fleet")
                + (
                    ""
                    if got.same_as is None
                    else f", {got.same_as}'s point: nothing in the traffic for it to read"
                )
                + ")"
            )

    job = FleetJob(
        traffic,
        config,
        settings,
        slo,
        warmup_s,
        shortcut=shortcut,
        seed=rng_seed,
        # The plan's verdict reads n-1, n and n+1: only the routers' search may stay unsettled.
        settle_sizes=frozenset({instances - 1, instances, instances + 1})
        if count_routers
        else None,
    )
    workers = workers_wanted(len(traffic.arrival_s))
    with FleetPool(job, workers, reported, executor) as pool:

        def point(size: int, routing: Routing) -> FleetPoint:
            return pool.measured(size, routing).point

        # Counting routers, only the assumed one needs n-1 and n+1: the others are searched
        # from n (their hit ratio is read there) by `router_counts`.
        base = [
            (size, routing)
            for size in sorted({max(1, instances - 1), instances, instances + 1})
            for routing in (routings if size == instances or not count_routers else routings[:1])
        ]
        pool.prefetch(base)
        estimate = estimate_check(traffic, config, base, shortcut, pool.workers)
        if progress is not None:
            progress(estimate.sentence())
        points.extend(point(*key) for key in base)
        ideal = profile.prefix.ideal_hit_ratio
        routers = (
            router_counts(points, point, instances, routings, ideal, pool.prefetch)
            if count_routers
            else []
        )
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
        estimated_wall_s=estimate.wall_s,
        estimated_full_wall_s=estimate.full_wall_s,
        simulated_requests=sum(p.requests for p in points),
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
    prefetch: Callable[[list[tuple[int, Routing]]], None] | None = None,
) -> list[RouterCount]:
    """Each routing's fewest instances meeting the SLO, simulating more sizes as needed.

    From the points already in `points` (n-1, n and n+1 for the assumed routing, the first;
    n for the others): when the smallest size simulated meets the SLO, the fewest below it is
    bisected (a fleet's attainment falls with fewer instances), trying the assumed routing's
    answer and the size below it first, since routings mostly tie: about two simulations per
    other routing instead of one per size. Those two are handed to `prefetch` for all the
    other routings at once (`FleetPool.prefetch` runs them side by side). When none meets
    the SLO, larger sizes are simulated one by one (up to 2n). The routings after the first
    with an answer search side by side (`_search_side_by_side`: each one's next size is
    prefetched while the others' are simulated; the same points as one after another). New
    points are appended to `points`. Each hit ratio at n is also given as a share of the
    profile's `ideal` one. A count whose deciding points (at it and one below) the search
    left unsettled (`planner.fleet.pool.FleetJob.settle_sizes`) says so.
    """
    limit = max(2 * instances, instances + 2)
    guess: int | None = None
    rest = list(routings)
    while rest and guess is None:
        routing = rest.pop(0)
        _search_side_by_side(
            {routing: _search(points, routing, guess, limit)}, point, prefetch, points
        )
        guess = min_instances_meeting([p for p in points if p.routing == routing])
        if guess is not None and prefetch is not None:
            first = min(guess, instances - 1)
            prefetch([(size, r) for r in routings[1:] for size in (first, first - 1)])
    searches = {r: _search(points, r, guess, limit) for r in rest}
    _search_side_by_side(searches, point, prefetch, points)
    out = []
    for routing in routings:
        mine = [p for p in points if p.routing == routing]
        at_n = [p.prefix_hit_ratio for p in mine if p.instances == instances]
        hit = at_n[0] if at_n else None
        fewest = min_instances_meeting(mine)
        deciding = {fewest, fewest - 1} if fewest is not None else {p.instances for p in mine}
        out.append(
            RouterCount(
                routing=routing,
                min_instances_meeting=fewest,
                searched_up_to=max(p.instances for p in mine),
                settled=all(p.settled for p in mine if p.instances in deciding),
                prefix_hit_ratio=hit,
                ideal_share=hit / ideal if hit is not None and ideal else None,
            )
        )
    points.sort(key=lambda p: (p.instances, routings.index(p.routing)))
    return out


def _search(
    points: list[FleetPoint], routing: Routing, guess: int | None, limit: int
) -> Generator[int, FleetPoint, None]:
    """The sizes `routing`'s count search simulates, one at a time: it yields a size and is
    sent its point (already appended to `points`).

    When the smallest size in `points` meets the SLO, the sizes below it until the fewest
    meeting it is found: 0 instances fail by definition; `guess` (or the size just below,
    when the guess is not below it) is tried first, then the size next to it on the side
    its outcome points to; then the gap is halved. When none meets it, larger sizes one by
    one up to `limit`.
    """

    def mine() -> list[FleetPoint]:
        return [p for p in points if p.routing == routing]

    smallest = min(p.instances for p in mine())
    if min_instances_meeting(mine()) == smallest > 1:
        lo, hi = 0, smallest
        probe = None if guess is None else min(guess, hi - 1)
        while hi - lo > 1:
            size = probe if probe is not None and lo < probe < hi else (lo + hi) // 2
            guessed = size == probe
            p = yield size
            if p.meets_slo:
                hi, probe = size, (size - 1 if guessed else None)
            else:
                lo, probe = size, (size + 1 if guessed else None)
    while min_instances_meeting(mine()) is None and max(p.instances for p in mine()) < limit:
        yield max(p.instances for p in mine()) + 1


def _search_side_by_side(
    searches: dict[Routing, Generator[int, FleetPoint, None]],
    point: Callable[[int, Routing], FleetPoint],
    prefetch: Callable[[list[tuple[int, Routing]]], None] | None,
    points: list[FleetPoint],
) -> None:
    """Run routings' searches (`_search`) together: each one's next size is handed to
    `prefetch` as soon as it is known, so independent searches keep the workers busy while
    this waits for one point at a time. A point depends only on its size and routing, so
    the points are those of running the searches one after another."""
    asked: dict[Routing, int] = {}
    for routing, search in searches.items():
        size = next(search, None)
        if size is not None:
            asked[routing] = size
    if prefetch is not None:
        prefetch([(size, r) for r, size in asked.items()])
    while asked:
        for routing in list(asked):
            p = point(asked[routing], routing)
            points.append(p)
            try:
                asked[routing] = searches[routing].send(p)
            except StopIteration:
                del asked[routing]
                continue
            if prefetch is not None:
                prefetch([(asked[routing], routing)])


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
