"""The fleet check's cost told before it starts: requests x points x a measured cost a request.

`estimate_check` times one instance's share of the check's own traffic (the first
`PROBE_REQUESTS` of it, under round-robin: what a simulated instance does for each request)
and multiplies by the requests the check's first points will simulate: every arrival for a
point simulated in full, the sub-fleet's share for a shortcut one (`planner.fleet.sample`;
the sub-fleets of k and 2k for a router that needs them to agree).
Divided by the workers it has, that is the wall time to expect, so a user can pick
`--executor` before waiting. Points added later (a search past n+1, routers counted) are
not in it, and a shortcut point whose bound fails costs more: the estimate says so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from planner.engine import EngineConfig
from planner.fleet.routing import Routing
from planner.fleet.sample import (
    EXACT_SHARE,
    GROUPED,
    MEAN_FIELD,
    SYMMETRIC,
    first_sample_size,
    stands_for,
    sub_indices,
)
from planner.fleet.sim import simulate_fleet
from planner.fleet.traffic import Traffic

PROBE_REQUESTS = 1500


@dataclass(frozen=True, kw_only=True)
class CheckEstimate:
    """What the first points of a fleet check will cost, from a timed probe."""

    points: int
    requests: int  # simulated over those points
    full_requests: int  # what they would simulate with every instance
    s_per_request: float  # the probe's wall time per request on this machine
    workers: int

    @property
    def cpu_s(self) -> float:
        return self.requests * self.s_per_request

    @property
    def wall_s(self) -> float:
        return self.cpu_s / max(1, min(self.workers, self.points))

    @property
    def full_wall_s(self) -> float:
        """The same points with every instance simulated."""
        return self.full_requests * self.s_per_request / max(1, min(self.workers, self.points))

    def sentence(self) -> str:
        return (
            f"fleet check: {self.points} points, {self.requests:,} requests to simulate "
            f"({self.full_requests:,} with every instance); {self.s_per_request * 1e3:.2g} ms "
            f"a request here -> about {self.cpu_s:.0f} s of CPU, {self.wall_s:.0f} s on "
            f"{self.workers} worker(s), {self.full_wall_s:.0f} s with every instance (more if "
            f"a shortcut's bound fails or more sizes are searched)"
        )


def probe_s_per_request(traffic: Traffic, config: EngineConfig, instances: int) -> float:
    """Wall seconds a request for one instance's round-robin share of `traffic` (its first
    `PROBE_REQUESTS`), simulated here."""
    numbers = sub_indices(len(traffic.arrival_s), instances, 1)[:PROBE_REQUESTS]
    if len(numbers) == 0:
        return 0.0
    wall0 = time.perf_counter()
    simulate_fleet(traffic.sub_requests(numbers), config, 1, "round_robin")
    return (time.perf_counter() - wall0) / len(numbers)


def estimate_check(
    traffic: Traffic,
    config: EngineConfig,
    points: Sequence[tuple[int, Routing]],
    shortcut: bool,
    workers: int,
) -> CheckEstimate:
    """The cost of simulating `points` (size, routing) of `traffic` (see the module); a
    router that stands for another there (`planner.fleet.sample.stands_for`) shares its
    point, counted once."""
    points = list(dict.fromkeys((size, stands_for(traffic, r)) for size, r in points))
    arrivals = len(traffic.arrival_s)
    sized = [size for size, _ in points]
    requests = 0
    for size, routing in points:
        sampled = shortcut and routing in SYMMETRIC | GROUPED
        k = first_sample_size(arrivals, size) if sampled else None
        if k is None:
            requests += arrivals
            continue
        # A router outside EXACT_SHARE and MEAN_FIELD settles no sooner than the second
        # sub-fleet (2k).
        first_only = routing in EXACT_SHARE | MEAN_FIELD or 4 * k > size
        sizes = (k,) if first_only else (k, 2 * k)
        requests += sum(len(sub_indices(arrivals, size, m)) for m in sizes)
    return CheckEstimate(
        points=len(points),
        requests=requests,
        full_requests=arrivals * len(points),
        s_per_request=probe_s_per_request(traffic, config, max(1, min(sized, default=1))),
        workers=workers,
    )
