"""Routers against the profiler's ideal prefix-hit ratio on the Mooncake conversation trace.

The whole Mooncake synthetic trace (3,993 requests, 512-token hash ids split into 16-token
engine blocks by `planner.fleet.traffic.trace_requests`) is replayed at its own arrival times
against N engine instances under each router. The hit ratio is the simulated engines' own
prefix-cache count (hit prompt tokens over queried ones); the truth it is held against is the
profiler's ideal hit ratio of the same file (`profiles.prefix`, every earlier block cached),
which no router computed. Each instance is H200 x llama-3.1-8b at tp=2 with fp8 KV (3.8 M
tokens of cache), so the caches are large enough for conversations to come back to them.

    python bench/routing_prefix.py [--instances 4] [--routing prefix_aware,round_robin,...]

Prints per router: hit ratio, share of the ideal, that share against 1/N, TTFT p90, wall s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from planner.engine import build_engine_config, kv_capacity_blocks
from planner.fleet.routing import ALL_ROUTINGS, parse_routings
from planner.fleet.sim import simulate_fleet
from planner.fleet.traffic import trace_requests
from profiles.build import build_profile
from profiles.readers import read_requests

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TRACE = TRACE / "mooncake_synthetic_trace.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--routing", default=",".join(ALL_ROUTINGS))
    args = parser.parse_args()
    config = build_engine_config("H200-141GB", "llama-3.1-8b", tp=2, kv_dtype_bytes=1)
    ideal = build_profile([str(args.trace)]).prefix.ideal_hit_ratio
    assert ideal is not None, "the trace has no block hashes"
    read = read_requests([str(args.trace)])
    requests = trace_requests(read.frame, 512, config.block_tokens, config.effective_max_model_len)
    n = args.instances
    print(
        f"{args.trace.name}: {len(requests)} requests; profiler's ideal hit ratio {ideal:.4f}; "
        f"{n} instances of {kv_capacity_blocks(config) * config.block_tokens:,} KV tokens"
    )
    print(
        f"{'routing':<18} {'hit ratio':>9} {'of ideal':>9} {'x 1/N':>6} {'TTFT p90':>9} {'wall':>7}"
    )
    for routing in parse_routings(args.routing):
        run = simulate_fleet(requests, config, n, routing)
        hit = run.prefix_hit_ratio or 0.0
        p90 = float(np.nanpercentile(run.ttft_s, 90))
        print(
            f"{routing:<18} {hit:>9.4f} {hit / ideal:>9.1%} {hit / ideal * n:>6.2f} "
            f"{p90:>8.2f}s {run.wall_s:>6.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
