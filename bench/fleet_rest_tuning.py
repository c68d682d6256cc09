"""Least-outstanding's shortcut against the full fleet, by first sample size k and the rest's
smoothing: the figures behind `planner.fleet.sample.MIN_SAMPLED_INSTANCES` and
`planner.fleet.rest.SMOOTHING_S`.

The chat preset at 400 req/s mean (the plan's peak and burst at `--limit 17.7rps`, 300
simulated seconds, as `capplan plan` checks it), seeds 0 and 1, n = 41, 42, 43: each full
least-outstanding fleet is simulated once (the baseline), then k of its n instances with the
rest of the fleet modelled (`planner.fleet.pool._sub_fleet_run`) for each k and smoothing
given. Prints TTFT and TPOT p95 of each against the full fleet's, and the largest gap.

    python bench/fleet_rest_tuning.py [--k 4,8] [--smoothing 3,1,0.5]
"""

from __future__ import annotations

import argparse

import numpy as np

import planner.fleet.rest as rest
from planner.capacity.arithmetic import parse_limit
from planner.capacity.plan import PlanOptions, build_plan
from planner.engine import build_engine_config
from planner.fleet.check import BURST_WINDOW_S
from planner.fleet.pool import FleetJob, _sub_fleet_run
from planner.fleet.sim import judge, simulate_fleet
from planner.fleet.traffic import BurstWindow, draw_traffic
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile

SPAN_S = 300.0
SIZES = (41, 42, 43)
SEEDS = (0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="4,8", help="first sample sizes")
    ap.add_argument("--smoothing", default="3,1,0.5", help="SMOOTHING_S values, seconds")
    args = ap.parse_args()
    config = build_engine_config("H100-80GB", "llama-3.1-8b", 1)
    slo = parse_slo("ttft:p95<=2s")
    profile = preset_profile("chat", rate_rps=400.0)
    options = PlanOptions(profile_path="chat", slo=slo, fleet=False)
    plan = build_plan(profile, parse_limit("17.7rps"), options)
    burst = BurstWindow(
        start_s=0.4 * SPAN_S, duration_s=BURST_WINDOW_S, factor=plan.demand.burst_factor
    )
    warmup_s = 0.1 * SPAN_S
    gaps: dict[tuple[int, float], list[float]] = {}
    for seed in SEEDS:
        traffic = draw_traffic(
            profile, plan.demand.peak_rps, SPAN_S, np.random.default_rng(seed),
            config.effective_max_model_len, "gamma", burst, block_tokens=config.block_tokens,
        )  # fmt: skip
        job = FleetJob(traffic, config, None, slo, warmup_s, seed=seed)
        for n in SIZES:
            full = judge(
                simulate_fleet(traffic.all_requests(), config, n, "least_outstanding"),
                slo, warmup_s,
            )  # fmt: skip
            assert full.ttft_p95_s and full.tpot_p95_s
            for k in (int(x) for x in args.k.split(",")):
                for smoothing in (float(x) for x in args.smoothing.split(",")):
                    rest.SMOOTHING_S = smoothing
                    got = judge(_sub_fleet_run(job, "least_outstanding", n, k), slo, warmup_s)
                    assert got.ttft_p95_s and got.tpot_p95_s
                    ttft = got.ttft_p95_s / full.ttft_p95_s - 1
                    tpot = got.tpot_p95_s / full.tpot_p95_s - 1
                    gaps.setdefault((k, smoothing), []).extend([ttft, tpot])
                    print(
                        f"seed {seed} n {n} k {k} smoothing {smoothing:g} s: "
                        f"TTFT p95 {ttft:+.1%}, TPOT p95 {tpot:+.1%}",
                        flush=True,
                    )
    for (k, smoothing), values in gaps.items():
        print(
            f"k {k}, smoothing {smoothing:g} s: p95 gaps {min(values):+.1%} to "
            f"{max(values):+.1%} against the full fleet"
        )


if __name__ == "__main__":
    main()
