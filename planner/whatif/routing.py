"""`capplan whatif --routing`: the routers compared on the profile for the cheapest candidate.

The candidate ranked first (cheapest, then fastest) is simulated as a fleet of its planned
instances under each router (`planner.fleet.check.fleet_check` with `count_routers`): each
router's fewest instances meeting the SLO and the prefix-hit ratio the simulated engines
reach, against the profile's ideal one, as `capplan plan --routing` gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from contracts.plan import Demand, FleetCheck
from contracts.whatif import WhatifCandidate
from planner.engine import EngineConfig
from planner.fleet.check import fleet_check
from planner.whatif.options import WhatifOptions
from profiles.model import Profile


def compare_routing(
    profile: Profile,
    options: WhatifOptions,
    candidates: list[WhatifCandidate],
    configs: Mapping[str, EngineConfig],
    demand: Demand,
    progress: Callable[[str], None] | None = None,
) -> tuple[str, FleetCheck] | None:
    """(label, router comparison) of the first-ranked candidate with an engine config, or
    None when `options.routings` is None or no candidate has a planned count."""
    if options.routings is None:
        return None
    ranked = sorted(
        (c for c in candidates if c.rank and c.instances and c.label in configs),
        key=lambda c: c.rank or 0,
    )
    if not ranked:
        return None
    best = ranked[0]
    assert best.instances is not None
    check = fleet_check(
        profile,
        configs[best.label],
        demand.peak_rps * options.growth,
        best.instances,
        options.slo,
        options.routing_span_s,
        rng_seed=options.seed,
        routings=options.routings,
        burst_factor=demand.burst_factor,
        progress=progress,
        settings=options.routing_settings,
        count_routers=True,
        executor=options.executor,
    )
    return best.label, check
