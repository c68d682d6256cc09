"""The capacity bound (planner.fleet.bound): a sub-fleet's miss decided for the whole fleet
only where the full simulation misses too, and the fleet check's cut that uses it."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import build_engine_config
from planner.fleet.bound import proven_miss
from planner.fleet.pool import FleetJob, measure
from planner.fleet.routing import Routing
from planner.fleet.sample import sub_indices
from planner.fleet.sim import judge, simulate_fleet
from planner.fleet.traffic import Traffic, draw_traffic
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b", 1)
SLO = parse_slo("ttft:p95<=2s")
SPAN_S = 30.0
WARMUP_S = 3.0


def _traffic(rate_rps: float) -> Traffic:
    profile = preset_profile("chat", rate_rps=40.0)
    return draw_traffic(
        profile, rate_rps, SPAN_S, np.random.default_rng(4), CONFIG.effective_max_model_len
    )


def test_the_bound_never_turns_a_full_meets_into_a_miss() -> None:
    # 90 req/s on 2, 3 and 5 instances: 45 (far past one instance's ceiling), 30 (past it)
    # and 18 req/s each (the limit is 17.7 at this SLO: the full fleet meets).
    traffic = _traffic(90.0)
    said = {}
    for size in (2, 3, 5):
        full = simulate_fleet(traffic.all_requests(), CONFIG, size, "least_outstanding")
        sub = simulate_fleet(
            traffic.sub_requests(sub_indices(len(traffic.arrival_s), size, 1)), CONFIG, 1
        )
        bound = proven_miss(traffic.arrival_s, size, sub, SLO, WARMUP_S)
        said[size] = (bound, judge(full, SLO, WARMUP_S).meets_slo)
    assert not any(bound and meets for bound, meets in said.values()), said
    assert said[2] == (True, False), said  # the bound decides the overloaded fleet
    assert said[5] == (False, True), said  # and stays silent where the fleet meets


def test_an_overloaded_point_is_decided_on_its_sub_fleet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import planner.fleet.sample as sample

    monkeypatch.setattr(sample, "MIN_SAMPLED_REQUESTS", 100)

    monkeypatch.setattr(sample, "MIN_SAMPLED_INSTANCES", 4)  # small fleets: the mechanics
    job = FleetJob(_traffic(360.0), CONFIG, None, SLO, WARMUP_S)
    # 45 req/s an instance under least-outstanding: a sub-fleet's miss used to go to the
    # full simulation of all 8 instances; the bound settles it on 4.
    got = measure(job, 8, "least_outstanding").point
    assert not got.meets_slo
    assert got.sampled_instances == 4


def test_a_search_point_stops_at_the_search_cap_unsettled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import planner.fleet.sample as sample

    monkeypatch.setattr(sample, "MIN_SAMPLED_REQUESTS", 100)

    monkeypatch.setattr(sample, "MIN_SAMPLED_INSTANCES", 4)  # small fleets: the mechanics
    monkeypatch.setattr(sample, "REL_WIDTH", 0.0)  # no "meets" holds over the bootstrap
    traffic = _traffic(120.0)
    searched = FleetJob(traffic, CONFIG, None, SLO, WARMUP_S, settle_sizes=frozenset({15, 17}))
    got = measure(searched, 16, "round_robin").point
    assert got.meets_slo  # 7.5 req/s an instance
    assert (got.sampled_instances, got.settled) == (4, False)  # its first sub-fleet
    # One of the plan's own sizes is never left unsettled (the full fleet decides it).
    planned = FleetJob(traffic, CONFIG, None, SLO, WARMUP_S, settle_sizes=frozenset({16}))
    own = measure(planned, 16, "round_robin").point
    assert (own.sampled_instances, own.settled) == (None, True)


def test_a_router_count_on_an_unsettled_point_says_so() -> None:
    from contracts.plan import FleetPoint
    from planner.fleet.check import router_counts

    def point(size: int, routing: Routing) -> FleetPoint:
        return FleetPoint(
            instances=size,
            routing=routing,
            attainment=1.0 if size >= 5 else 0.5,
            meets_slo=size >= 5,
            requests=100,
            settled=size != 4 or routing == "round_robin",  # only the other's 4 is unsettled
        )

    routers: tuple[Routing, ...] = ("round_robin", "least_outstanding")
    points = [point(n, r) for n in (7, 8, 9) for r in routers]
    found = {c.routing: c for c in router_counts(points, point, 8, routers, None)}
    assert found["round_robin"].min_instances_meeting == 5
    assert found["round_robin"].settled
    assert found["least_outstanding"].min_instances_meeting == 5
    assert not found["least_outstanding"].settled


def test_a_failing_bootstrap_stops_judging_and_leaves_the_draws_as_they_were() -> None:
    from planner.fleet.sample import RESAMPLES, bootstrap_agrees
    from planner.fleet.sim import FleetRun, FleetVerdict

    instances = 6
    run = FleetRun(
        instances=instances,
        routing="round_robin",
        arrival_s=np.arange(12.0),
        ttft_s=np.ones(12),
        tpot_s=np.ones(12),
        e2e_s=np.ones(12),
        output_tokens=np.ones(12, dtype=np.int64),
        instance=np.arange(12) % instances,
        simulated_s=12.0,
        wall_s=0.0,
        steps=0,
    )
    calls = []

    def judged(_: FleetRun) -> FleetVerdict:
        calls.append(1)
        return FleetVerdict(1.0, 1.0, 1.0, 1.0, meets_slo=True, requests=12)

    said_miss = FleetVerdict(0.5, 3.0, 1.0, 3.0, meets_slo=False, requests=12)
    rng = np.random.default_rng(7)
    assert not bootstrap_agrees(run, said_miss, judged, rng)
    assert len(calls) == 4  # 95 % of 60 must agree: the fourth disagreement ends it
    # The generator is where all 60 draws leave it: a later sub-fleet's draws are unchanged.
    after_all = np.random.default_rng(7)
    after_all.integers(instances, size=(RESAMPLES, instances))
    assert rng.integers(1 << 30) == after_all.integers(1 << 30)
