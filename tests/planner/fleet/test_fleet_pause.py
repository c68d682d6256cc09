"""The pausable fleet run (planner.fleet.sim.FleetSimulation) that the virtual limit search
advances as it watches a level: paused anywhere it is the same run, to the bit; a request
finished by the pause has its final figures; and a run over only the earlier arrivals agrees
with the full one on every request that finished before the next arrival, but not on those
still running then (which is why a level stopped before its last arrival is simulated again,
from a copy of the run saved before the stop that takes no later arrival).
"""

from __future__ import annotations

import numpy as np

from planner.engine import build_engine_config
from planner.fleet.sim import FleetRun, FleetSimulation, simulate_fleet
from planner.fleet.traffic import profile_requests
from profiles.presets import preset_profile

CONFIG = build_engine_config("H100-80GB", "llama-3.1-8b", gpu_memory_utilization=0.25)
REQUESTS = sorted(
    profile_requests(
        preset_profile("chat"), 7.0, 40.0, np.random.default_rng(3), CONFIG.effective_max_model_len
    ),
    key=lambda r: r.arrival_s,
)


def _figures(run: FleetRun) -> list[np.ndarray]:
    return [run.arrival_s, run.ttft_s, run.tpot_s, run.e2e_s, run.output_tokens]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def test_a_run_paused_anywhere_is_the_same_run() -> None:
    whole = simulate_fleet(REQUESTS, CONFIG, 1)
    sim = FleetSimulation(REQUESTS, CONFIG, 1)
    for until_s in (3.0, 3.0, 10.5, 17.25, 30.0):
        sim.advance(until_s)
        so_far = sim.run()
        done = ~np.isnan(so_far.e2e_s)
        assert done.any() and not done.all()
        # Finished by the pause: final figures, and nothing finishes after it.
        assert np.all(so_far.arrival_s[done] + so_far.e2e_s[done] <= until_s)
        assert _same([f[done] for f in _figures(so_far)], [f[done] for f in _figures(whole)])
    sim.advance()
    paused = sim.run()
    assert _same(_figures(paused), _figures(whole))
    assert (paused.steps, paused.simulated_s) == (whole.steps, whole.simulated_s)
    assert paused.prefix_hit_tokens == whole.prefix_hit_tokens


def test_earlier_arrivals_alone_agree_until_the_next_arrival() -> None:
    whole = simulate_fleet(REQUESTS, CONFIG, 1)
    m = sum(r.arrival_s < 20.0 for r in REQUESTS)
    prefix = simulate_fleet(REQUESTS[:m], CONFIG, 1)
    next_arrival = REQUESTS[m].arrival_s
    end = whole.arrival_s[:m] + whole.e2e_s[:m]
    before = end < next_arrival
    assert before.sum() > 50
    assert _same([f[before] for f in _figures(prefix)], [f[:m][before] for f in _figures(whole)])
    # Those still running then share their steps with later arrivals in the full run.
    assert not _same(_figures(prefix), [f[:m] for f in _figures(whole)])


def test_a_copy_taking_no_later_arrival_is_the_run_over_the_earlier_ones() -> None:
    m = sum(r.arrival_s < 20.0 for r in REQUESTS)
    sim = FleetSimulation(REQUESTS, CONFIG, 1)
    sim.advance(12.0)
    rest = sim.fork(m)
    rest.advance()
    assert _same(_figures(rest.run(m)), _figures(simulate_fleet(REQUESTS[:m], CONFIG, 1)))
    sim.advance()  # the original goes on with every arrival
    assert _same(_figures(sim.run()), _figures(simulate_fleet(REQUESTS, CONFIG, 1)))
