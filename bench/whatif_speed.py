"""Wall time of a 50-candidate `capplan whatif` grid on the chat preset (goal: <= 2 minutes).

5 GPUs x kv_dtype (fp16, fp8) x max_num_seqs (32, 64, 128, 192, 256), each candidate's limit
searched in virtual time with 60 s levels. Prints the wall time, the simulated requests and
their rate, and the five cheapest candidates.

    python bench/whatif_speed.py
"""

from __future__ import annotations

import time

from planner.slo.spec import parse_slo
from planner.whatif.options import WhatifOptions
from planner.whatif.run import parse_vary, run_whatif
from profiles.presets import preset_profile


def main() -> None:
    options = WhatifOptions(
        "preset:chat",
        parse_slo("ttft:p95<=2s,tpot:p95<=100ms"),
        gpus=("H100-80GB", "H200-141GB", "A100-80GB", "L40S-48GB", "A10-24GB"),
        vary=parse_vary("kv_dtype,max_num_seqs=32:64:128:192:256"),
        level_s=60.0,
    )
    start = time.perf_counter()
    result = run_whatif(preset_profile("chat"), options)
    wall = time.perf_counter() - start
    n = len(result.candidates)
    print(
        f"{n} candidates in {wall:.1f} s wall ({wall / n:.2f} s each); "
        f"{result.simulated_requests:,} simulated requests, "
        f"{result.simulated_requests / wall:,.0f} simulated requests per second"
    )
    for c in sorted(result.candidates, key=lambda c: c.rank or 10**9)[:5]:
        print(
            f"  #{c.rank} {c.label}: {c.limit_rps:.3g} req/s, {c.instances} instances, "
            f"${c.monthly_cost_usd:,.0f}/month, ${c.usd_per_million_output_tokens:.2f}/M out"
        )


if __name__ == "__main__":
    main()
