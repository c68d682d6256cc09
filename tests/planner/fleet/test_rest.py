"""The rest of a least-outstanding fleet (planner.fleet.rest): the simulated instances hold
the others' mean load, take their share of the arrivals, and the shortcut's point is the
same to the bit in a worker process."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import build_engine_config
from planner.fleet.pool import FleetJob, FleetPool, measure
from planner.fleet.rest import ELSEWHERE, RestOfFleet
from planner.fleet.sample import sub_indices
from planner.fleet.sim import FleetSimulation
from planner.fleet.traffic import draw_traffic
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b", 1)


def _taken_at_once(arrivals: int, instances: int, simulated: int) -> list[int]:
    """Requests each simulated instance holds after `arrivals` all arriving at t = 0 (nothing
    finishes, so the others hold the rest)."""
    rest = RestOfFleet(
        np.zeros(arrivals), instances, simulated, lambda *_: None,  # type: ignore[arg-type,return-value]
        np.random.default_rng(0),
    )  # fmt: skip
    held = [0] * simulated
    k = 0
    while True:
        k, i = rest.next_taken(k, 0.0, held)
        if i == ELSEWHERE:
            return held
        held[i] += 1
        k += 1


@pytest.mark.parametrize(("instances", "simulated"), [(3, 1), (10, 4), (42, 4)])
def test_the_simulated_instances_hold_the_others_mean_load(instances: int, simulated: int) -> None:
    others = instances - simulated
    ahead = []
    for arrivals in range(1, 8 * instances):
        held = _taken_at_once(arrivals, instances, simulated)
        mean = (arrivals - sum(held)) / others
        # Least-outstanding: no instance more than one request from the others' mean.
        assert all(abs(h - mean) <= 1.0 for h in held), (arrivals, held, mean)
        ahead.append(sum(held) / simulated - mean)
    # Nor ahead of them or behind on average (a tie is shared, not always won or lost).
    assert abs(float(np.mean(ahead))) < 0.15, np.mean(ahead)
    # Over whole rounds, exactly their share.
    assert sum(_taken_at_once(5 * instances, instances, simulated)) == 5 * simulated


def test_the_simulated_instances_take_their_share_of_a_fleets_traffic() -> None:
    traffic = draw_traffic(
        preset_profile("chat", rate_rps=150.0), 226.0, 60.0, np.random.default_rng(4),
        CONFIG.effective_max_model_len, block_tokens=CONFIG.block_tokens,
    )  # fmt: skip
    n = len(traffic.arrival_s)
    rest = RestOfFleet(traffic.arrival_s, 16, 4, traffic.request_maker(), np.random.default_rng(1))
    sim = FleetSimulation([], CONFIG, 4, "least_outstanding", rest=rest)
    sim.advance()
    run = sim.run()
    # The others finish requests as the simulated instances do: their share stays 4 of 16.
    share = len(run.arrival_s) / len(sub_indices(n, 16, 4))
    assert 0.97 < share < 1.03, share
    assert set(run.instance.tolist()) == {0, 1, 2, 3}
    assert np.isfinite(run.e2e_s).all()  # every routed request finished
    # The routed requests are the stream's shapes in order, as a sub-fleet's are.
    again = traffic.sub_requests(np.arange(len(run.arrival_s)))
    assert [r.prompt_tokens for r in sim.reqs if r is not None] == [r.prompt_tokens for r in again]


def test_a_least_outstanding_shortcut_point_is_the_same_in_a_worker() -> None:
    """A worker process (as any executor's) gives the point this process gives, bit for
    bit: the rest's completions are drawn from the job's seed."""
    traffic = draw_traffic(
        preset_profile("chat", rate_rps=150.0), 226.0, 90.0, np.random.default_rng(2),
        CONFIG.effective_max_model_len, block_tokens=CONFIG.block_tokens,
    )  # fmt: skip
    job = FleetJob(traffic, CONFIG, None, parse_slo("ttft:p95<=2s"), 9.0)
    with FleetPool(job, 2) as pool:
        pool.prefetch([(20, "least_outstanding")])
        there = pool.measured(20, "least_outstanding").point
    here = measure(job, 20, "least_outstanding").point
    assert here.sampled_instances == 10  # 20,000 arrivals: 10 of 20 for 10,000 requests
    assert there == here
