"""The fleet simulator and its check: event loop, routing, SLO judging, n-1 vs n on a real trace."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.errors import ConfigError
from contracts.plan import FleetPoint, RouterCount
from planner.capacity.arithmetic import parse_limit
from planner.capacity.plan import PlanOptions, build_plan
from planner.engine import EngineRequest, build_engine_config, simulate
from planner.fleet.check import (
    fleet_verdict,
    min_instances_meeting,
    router_counts,
    single_instance_limit,
)
from planner.fleet.routing import Routing
from planner.fleet.sim import ROUTINGS, FleetRun, judge, simulate_fleet
from planner.slo.spec import parse_slo
from tests.helpers.shared_data import azure_conv_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b")


def _requests(n: int, gap_s: float) -> list[EngineRequest]:
    rng = np.random.default_rng(3)
    return [
        EngineRequest(str(k), int(rng.integers(50, 3000)), int(rng.integers(1, 300)), k * gap_s)
        for k in range(n)
    ]


def test_one_instance_fleet_agrees_with_engine_simulate() -> None:
    reqs = _requests(300, 0.05)
    run = simulate_fleet(reqs, CONFIG, 1)
    timelines = simulate(reqs, CONFIG)
    expected_ttft = np.array([t.ttft_s for t in timelines], dtype=float)
    expected_e2e = np.array([t.e2e_s for t in timelines], dtype=float)
    np.testing.assert_allclose(run.ttft_s, expected_ttft, rtol=1e-9)
    np.testing.assert_allclose(run.e2e_s, expected_e2e, rtol=1e-9)
    assert run.simulated_s == pytest.approx(max(t.finished_s or 0.0 for t in timelines))


def test_round_robin_cycles_and_least_outstanding_balances() -> None:
    reqs = _requests(400, 0.01)
    rr = simulate_fleet(reqs, CONFIG, 4, "round_robin")
    assert rr.instance.tolist() == [k % 4 for k in range(400)]
    lor = simulate_fleet(reqs, CONFIG, 4, "least_outstanding")
    counts = np.bincount(lor.instance, minlength=4)
    assert counts.min() > 0.15 * 400
    assert not np.isnan(lor.e2e_s).any()
    # Spreading load over more instances never makes the mean TTFT worse here.
    one = simulate_fleet(reqs, CONFIG, 1)
    assert np.nanmean(lor.ttft_s) < np.nanmean(one.ttft_s)


def test_bad_fleet_inputs() -> None:
    with pytest.raises(ConfigError):
        simulate_fleet(_requests(3, 1.0), CONFIG, 0)
    with pytest.raises(ConfigError):
        simulate_fleet(_requests(3, 1.0), CONFIG, 2, "random")  # type: ignore[arg-type]


def _run(ttft: list[float], tpot: list[float], e2e: list[float]) -> FleetRun:
    n = len(ttft)
    return FleetRun(
        instances=1,
        routing="round_robin",
        arrival_s=np.arange(n, dtype=float),
        ttft_s=np.array(ttft),
        tpot_s=np.array(tpot),
        e2e_s=np.array(e2e),
        output_tokens=np.ones(n, dtype=np.int64),
        instance=np.zeros(n, dtype=np.int64),
        simulated_s=float(n),
        wall_s=0.0,
        steps=0,
    )


def test_judge_uses_the_limit_search_verdict() -> None:
    ttft = [0.1] * 18 + [3.0, np.nan]  # one slow, one never finished (an error)
    run = _run(ttft, [0.01] * 19 + [np.nan], [1.0] * 19 + [np.nan])
    verdict = judge(run, parse_slo("ttft:p90<=2s,tpot:p90<=20ms"), warmup_s=0.0)
    assert verdict.attainment == pytest.approx(18 / 20)
    assert verdict.requests == 20
    assert verdict.meets_slo  # p90 of the finished requests' TTFT is 0.1 s
    # p99 interpolates between 0.1 s and 3 s: 0.1 + 0.82 x 2.9 = 2.48 s.
    assert not judge(run, parse_slo("ttft:p99<=2s"), 0.0).meets_slo
    assert judge(run, parse_slo("attainment>=90%:ttft<=2s"), 0.0).meets_slo
    assert not judge(run, parse_slo("attainment>=95%:ttft<=2s"), 0.0).meets_slo
    assert not judge(run, parse_slo("ttft:p50<=2s,errors<=1%"), 0.0).meets_slo
    # Warm-up: requests arriving before it are not judged.
    assert judge(run, parse_slo("ttft:p99<=200ms"), warmup_s=10.0).requests == 10
    assert not judge(run, parse_slo("ttft:p99<=200ms"), warmup_s=10.0).meets_slo


def test_slo_the_simulator_cannot_judge() -> None:
    run = _run([0.1], [0.01], [1.0])
    with pytest.raises(ConfigError, match="itl_max"):
        judge(run, parse_slo("itl_max:p99<=200ms"), 0.0)


def test_fleet_on_azure_conv_n_meets_and_n_minus_1_does_not() -> None:
    """Azure conv at 2.6 instances' worth of traffic, with its burst: 3 meet the SLO, 2 do not."""
    profile = azure_conv_profile()
    slo_text = "ttft:p95<=1s,tpot:p95<=50ms"
    limit_rps = single_instance_limit(profile, CONFIG, parse_slo(slo_text), 90.0, rng_seed=1)
    options = PlanOptions(
        profile_path="azure-conv",
        slo=parse_slo(slo_text),
        peak_rps=2.6 * limit_rps,
        headroom=0.0,
        redundancy=0,
        fleet_span_s=90.0,
        seed=2,
    )
    plan = build_plan(profile, parse_limit(f"{limit_rps:.4f}rps", parse_slo(slo_text)), options)
    assert plan.instances == 3
    fleet = plan.checks.fleet
    assert fleet is not None
    for routing in ("round_robin", "least_outstanding"):
        at = {p.instances: p for p in fleet.points if p.routing == routing}
        assert at[3].meets_slo, at[3]
        assert not at[2].meets_slo, at[2]
        assert at[2].attainment < at[3].attainment <= at[4].attainment + 1e-9
    assert fleet.verdict == "n=3 meets the SLO, n-1=2 does not"
    assert "10 s burst" in fleet.arrivals  # the profile's 10 s peak is above its p99 minute


def _points(meets: dict[int, tuple[bool, bool]]) -> list[FleetPoint]:
    return [
        FleetPoint(
            instances=n, routing=routing, attainment=1.0 if ok else 0.5, meets_slo=ok, requests=100
        )
        for n, pair in meets.items()
        for routing, ok in zip(ROUTINGS, pair, strict=True)
    ]


def test_fleet_verdicts() -> None:
    assert fleet_verdict(
        _points({2: (False, False), 3: (True, True), 4: (True, True)}), 3
    ).english() == ("n=3 meets the SLO, n-1=2 does not")
    both = fleet_verdict(_points({2: (True, True), 3: (True, True), 4: (True, True)}), 3).english()
    assert "so does n-1=2" in both
    short = _points({2: (False, False), 3: (False, True), 4: (True, True), 5: (True, True)})
    assert min_instances_meeting(short) == 3
    verdict = fleet_verdict(short, 3).english()
    assert "does NOT meet" in verdict and "only with least_outstanding" in verdict
    none = _points({2: (False, False), 3: (False, False), 4: (False, False)})
    assert min_instances_meeting(none) is None


@pytest.mark.parametrize("instances", [3, 8, 16, 40])
def test_router_counts_find_each_routers_fewest_with_few_simulations(instances: int) -> None:
    """Each router meets the SLO from a known size up (its truth here); the search must name it
    for every router, from sizes far below the plan's n, in about two simulations per router
    when routers tie (the downward scan this replaced fails the bound at n = 16 and 40)."""
    routers: tuple[Routing, ...] = (
        "round_robin",
        "least_outstanding",
        "power_of_two",
        "session_affinity",
    )
    fewest = dict(zip(routers, (2, 2, 1, instances + 2), strict=True))
    asked: list[tuple[int, str]] = []

    def point(size: int, routing: Routing) -> FleetPoint:
        asked.append((size, routing))
        ok = size >= fewest[routing]
        return FleetPoint(
            instances=size,
            routing=routing,
            attainment=1.0 if ok else 0.5,
            meets_slo=ok,
            requests=100,
        )

    points = [point(n, r) for n in (instances - 1, instances, instances + 1) for r in routers]
    first = len(asked)
    found = router_counts(points, point, instances, routers, None)
    assert {c.routing: c.min_instances_meeting for c in found} == fewest
    searched = asked[first:]
    assert len(set(searched)) == len(searched), "a size was simulated twice"
    # round_robin bisects below n-1 (log2 n); the next three try the answer before theirs
    # and its neighbour (2 each, session_affinity's fails at once: 1), then it scans up (1).
    assert len(searched) <= (instances - 1).bit_length() + 2 + 2 + 1 + 1


def test_points_from_worker_processes_equal_the_ones_simulated_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool's spawned workers replay the same requests: each point they return is the
    point this process simulates; a worker count that is not a count is refused."""
    from planner.fleet.pool import FleetJob, FleetPool, measure, workers_wanted
    from planner.fleet.traffic import draw_traffic
    from profiles.presets import preset_profile

    traffic = draw_traffic(
        preset_profile("chat", rate_rps=40.0), 40.0, 10.0, np.random.default_rng(3), 8192
    )
    job = FleetJob(traffic, CONFIG, None, parse_slo("ttft:p95<=0.5s"), 1.0)
    keys: list[tuple[int, Routing]] = [
        (1, "round_robin"),
        (4, "least_outstanding"),
        (8, "power_of_two"),
    ]
    with FleetPool(job, 2) as pool:
        pool.prefetch(keys)
        there = [pool.measured(*key).point for key in keys]
    assert there == [measure(job, *key).point for key in keys]
    assert len({p.attainment for p in there}) > 1  # the sizes differ: not one point thrice
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "two")
    with pytest.raises(ConfigError, match="CAPPLAN_FLEET_WORKERS='two': expected a whole"):
        workers_wanted(10)
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "1")
    assert workers_wanted(10**6) == 1


@pytest.mark.parametrize("kv_free_fraction", [None, 0.02])
def test_decode_runs_give_the_fleet_a_step_by_step_engine_gives(
    kv_free_fraction: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines that take their decode runs at once (and give back the steps after the one
    in flight when a request is routed to them) yield, under every router, the run that
    engines stepping one step at a time yield, to the last bit: with shared prefixes and
    sessions, and with a KV cache small enough to evict and preempt."""
    from planner.engine.decode_run import DecodeRuns
    from planner.fleet.routing import ALL_ROUTINGS
    from planner.fleet.traffic import BurstWindow, profile_requests
    from profiles.presets import preset_profile

    config = CONFIG.model_copy(update={"kv_free_fraction": kv_free_fraction})
    requests = profile_requests(
        preset_profile("agent"),
        12.0,
        40.0,
        np.random.default_rng(5),
        config.effective_max_model_len,
        burst=BurstWindow(start_s=15.0, duration_s=5.0, factor=2.0),
        block_tokens=config.block_tokens,
    )
    taken = cut = 0
    take_run, cut_run = DecodeRuns.take, DecodeRuns.cut

    def counted_take(self: DecodeRuns, now_s: float) -> list[float]:
        nonlocal taken
        ends = take_run(self, now_s)
        taken += len(ends)
        return ends

    def counted_cut(self: DecodeRuns, steps: int) -> None:
        nonlocal cut
        cut += 1
        cut_run(self, steps)

    monkeypatch.setattr(DecodeRuns, "take", counted_take)
    monkeypatch.setattr(DecodeRuns, "cut", counted_cut)
    fast = {r: simulate_fleet(requests, config, 3, r) for r in ALL_ROUTINGS}
    # Most steps are in runs, unless the cache is so small that requests mostly wait.
    share = taken / sum(run.steps for run in fast.values())
    assert share > (0.5 if kv_free_fraction is None else 0.01) and cut > 10, (share, cut)
    monkeypatch.setattr(DecodeRuns, "start", lambda self: None)
    for routing, run in fast.items():
        slow = simulate_fleet(requests, config, 3, routing)
        for field in ("arrival_s", "ttft_s", "tpot_s", "e2e_s", "output_tokens", "instance"):
            np.testing.assert_array_equal(getattr(run, field), getattr(slow, field), err_msg=field)
        assert (run.simulated_s, run.steps) == (slow.simulated_s, slow.steps)
        assert run.prefix_hit_tokens == slow.prefix_hit_tokens > 0
        assert run.prefix_queried_tokens == slow.prefix_queried_tokens


def test_router_count_searches_after_the_first_run_side_by_side() -> None:
    """With a prefetch (the pool's workers), the routers after the one that sets the guess
    search together, each next size handed over before it is waited for: their points
    interleave, and the counts and points are those of searching one router after another."""
    routers: tuple[Routing, ...] = ("round_robin", "least_outstanding", "power_of_two")
    fewest = dict(zip(routers, (9, 5, 13), strict=True))
    instances = 40

    def run(with_prefetch: bool) -> tuple[list[RouterCount], list[tuple[int, str]], bool]:
        asked: list[tuple[int, str]] = []
        handed: set[tuple[int, str]] = set()
        all_handed = True

        def point(size: int, routing: Routing) -> FleetPoint:
            nonlocal all_handed
            asked.append((size, routing))
            all_handed &= len(asked) <= 9 or routing == "round_robin" or (size, routing) in handed
            ok = size >= fewest[routing]
            return FleetPoint(
                instances=size, routing=routing, attainment=1.0 if ok else 0.5,
                meets_slo=ok, requests=100,
            )  # fmt: skip

        points = [point(n, r) for n in (instances - 1, instances, instances + 1) for r in routers]
        first = len(asked)  # 9: n-1, n and n+1 of each router
        found = router_counts(
            points, point, instances, routers, None, handed.update if with_prefetch else None
        )
        return found, asked[first:], all_handed

    alone, asked_alone, _ = run(False)
    together, asked_together, all_handed = run(True)
    assert together == alone
    assert {c.routing: c.min_instances_meeting for c in together} == fewest
    assert sorted(asked_together) == sorted(asked_alone)
    assert all_handed  # every later router's point went to the workers before it was awaited
    others = [r for _, r in asked_together if r != "round_robin"]
    # least-outstanding's and power-of-two's searches take turns, not one after the other
    assert others.index("power_of_two") < len(others) - others[::-1].index("least_outstanding") - 1
