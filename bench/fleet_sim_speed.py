"""Fleet simulator speed: simulated seconds per wall second, one hour of Azure conv at 10x its rate.

The Azure conv trace (one hour, ~19.4k requests) is time-compressed 10x and looped 10 times to
fill one hour at 10x its rate (~194k requests, real lengths, the trace's own burst shape),
replayed against 8 H100 x llama-3.1-8b engine instances with least-outstanding routing.
Baseline in the same run: the engine's own single-instance `simulate()` over the requests the
fleet routed to instance 0 (the same per-instance load without the fleet's event loop).

    python bench/fleet_sim_speed.py [--instances 8] [--speedup 10] [--hours 1] [--profile]

Goal: >= 1,000x real time per instance on one core (simulated seconds x instances / wall s).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np
import polars as pl

from planner.engine import EngineRequest, build_engine_config, simulate
from planner.fleet.sim import simulate_fleet

TRACE = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "data"
    / "AzureLLMInferenceTrace_conv.csv"
)


def trace_requests(speedup: float, hours: float, max_len: int) -> list[EngineRequest]:
    frame = (
        pl.read_csv(TRACE)
        .with_columns(pl.col("TIMESTAMP").str.to_datetime("%Y-%m-%d %H:%M:%S%.f"))
        .sort("TIMESTAMP")
    )
    t = (frame["TIMESTAMP"] - frame["TIMESTAMP"][0]).dt.total_microseconds().to_numpy() / 1e6
    span = float(t[-1]) + float(np.diff(t).mean())
    prompts = frame["ContextTokens"].to_numpy()
    outputs = frame["GeneratedTokens"].to_numpy()
    compressed = t / speedup
    loops = int(np.ceil(hours * 3600.0 / (span / speedup)))
    out: list[EngineRequest] = []
    for loop in range(loops):
        offset = loop * span / speedup
        for k in range(len(t)):
            at = compressed[k] + offset
            if at >= hours * 3600.0:
                break
            p = max(1, min(int(prompts[k]), max_len - 1))
            o = max(1, min(int(outputs[k]), max_len - p))
            out.append(EngineRequest(f"{loop}-{k}", p, o, float(at)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--speedup", type=float, default=10.0)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--profile", action="store_true", help="cProfile the fleet run")
    args = parser.parse_args()
    config = build_engine_config("H100-80GB", "llama-3.1-8b", record_token_times=False)
    reqs = trace_requests(args.speedup, args.hours, config.effective_max_model_len)
    print(
        f"{len(reqs):,} requests over {args.hours:g} h at {args.speedup:g}x the trace's rate "
        f"({len(reqs) / (args.hours * 3600):.1f} req/s), {args.instances} instances"
    )

    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    run = simulate_fleet(reqs, config, args.instances, "least_outstanding")
    if profiler:
        profiler.disable()
    done = int((~np.isnan(run.e2e_s)).sum())
    fleet_x = run.simulated_s / run.wall_s
    per_instance_x = fleet_x * args.instances
    print(
        f"fleet:    {run.simulated_s:,.0f} simulated s in {run.wall_s:.2f} wall s = "
        f"{fleet_x:,.0f}x real time for the fleet, {per_instance_x:,.0f}x per instance "
        f"({run.steps:,} steps, {run.wall_s / max(run.steps, 1) * 1e6:.1f} us/step, "
        f"{done:,} finished, TTFT p95 {np.nanpercentile(run.ttft_s, 95):.3f} s)"
    )

    mine = [
        r
        for r, i in zip(sorted(reqs, key=lambda r: r.arrival_s), run.instance, strict=True)
        if i == 0
    ]
    wall0 = time.perf_counter()
    timelines = simulate(mine, config)
    base_wall = time.perf_counter() - wall0
    base_sim = max(tl.finished_s or 0.0 for tl in timelines)
    base_x = base_sim / base_wall
    print(
        f"baseline: engine simulate() of instance 0's {len(mine):,} requests: {base_sim:,.0f} "
        f"simulated s in {base_wall:.2f} wall s = {base_x:,.0f}x real time for one instance"
    )
    print(f"ratio: fleet per-instance speed / single-engine speed = {per_instance_x / base_x:.2f}")
    goal = 1000.0
    print(
        f"goal >= {goal:,.0f}x real time per instance: "
        f"{'MET' if per_instance_x >= goal else 'NOT MET'} ({per_instance_x:,.0f}x)"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
