"""Wall time of `capplan whatif`: one candidate under the default steady-state rules (goal: at
most 10 s for an 8B model, 60 s for a 70B one, on two cores), and a 50-candidate grid with
fixed 60 s levels (goal: <= 2 minutes).

`--one`: Llama-3.1-8B bf16 on one H100 and Llama-3.1-70B fp8 on one H200 (the chat preset,
p99 TTFT <= 2 s and TPOT <= 50 ms), each under the default rules and with `--level-duration 60`
(the old default) beside it; prints wall seconds, levels, simulated requests and the limit,
and the wall time against its goal. The grid: 5 GPUs x kv_dtype (fp16, fp8) x max_num_seqs
(32, 64, 128, 192, 256); prints the wall time, the simulated requests and their rate, and
the five cheapest candidates. `--dask`: the same grid in this process alone
(`CAPPLAN_FLEET_WORKERS=1`) and then on a Dask cluster of two single-threaded worker
processes on this machine (`distributed.LocalCluster`, `--executor dask://...`); prints
both wall times, their ratio (goal: <= 0.6) and whether the candidates are identical (less
their wall times).

    python bench/whatif_speed.py [--one | --dask]
"""

from __future__ import annotations

import os
import sys
import time

from contracts.executor import LOCAL, ExecutorSpec, parse_executor
from contracts.whatif import Whatif
from planner.slo.spec import parse_slo
from planner.whatif.knobs import parse_vary
from planner.whatif.options import WhatifOptions
from planner.whatif.run import run_whatif
from profiles.presets import preset_profile

ONE = (
    ("llama-3.1-8b", "H100-80GB", "none", 10.0),
    ("llama-3.1-70b", "H200-141GB", "fp8", 60.0),
)


def one_candidate() -> None:
    """Each ONE candidate under the default rules and with fixed 60 s levels."""
    slo = parse_slo("ttft:p99<=2s,tpot:p99<=50ms")
    profile = preset_profile("chat")
    for model, gpu, quantization, goal_s in ONE:
        for level_s in (None, 60.0):
            options = WhatifOptions(
                profile_path="preset:chat", slo=slo, model=model, gpus=(gpu,),
                quantization=quantization, level_s=level_s,
            )  # fmt: skip
            start = time.perf_counter()
            c = run_whatif(profile, options).candidates[0]
            wall = time.perf_counter() - start
            how = "steady rules" if level_s is None else f"fixed {level_s:g} s levels"
            limit = f"{c.limit_rps:.3g} req/s" if c.limit_rps else c.problem
            print(
                f"{model} {quantization} on {gpu}, {how}: {wall:.1f} s wall "
                f"({wall / goal_s:.2f} x the {goal_s:g} s goal), {c.levels} levels, "
                f"{c.simulated_requests:,} simulated requests, limit {limit}"
            )


def grid(executor: ExecutorSpec = LOCAL) -> tuple[Whatif, float]:
    """The 50-candidate grid on `executor`, and its wall seconds."""
    options = WhatifOptions(
        profile_path="preset:chat",
        slo=parse_slo("ttft:p95<=2s,tpot:p95<=100ms"),
        gpus=("H100-80GB", "H200-141GB", "A100-80GB", "L40S-48GB", "A10-24GB"),
        vary=parse_vary("kv_dtype,max_num_seqs=32:64:128:192:256"),
        level_s=60.0,
        executor=executor,
    )
    start = time.perf_counter()
    result = run_whatif(preset_profile("chat"), options)
    return result, time.perf_counter() - start


def on_dask() -> None:
    """The grid in one process, then on two local Dask workers: wall times and identity."""
    from distributed import LocalCluster

    os.environ["CAPPLAN_FLEET_WORKERS"] = "1"
    alone, alone_s = grid()
    print(f"one process: {alone_s:.1f} s wall, load average {os.getloadavg()[0]:.1f}")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        address = cluster.scheduler_address.removeprefix("tcp://")
        remote, remote_s = grid(parse_executor(f"dask://{address}"))
    same = [c.model_dump(exclude={"wall_s"}) for c in remote.candidates] == [
        c.model_dump(exclude={"wall_s"}) for c in alone.candidates
    ]
    print(
        f"two Dask workers: {remote_s:.1f} s wall, load average {os.getloadavg()[0]:.1f}; "
        f"{remote_s / alone_s:.2f} x one process (goal <= 0.6); "
        f"{len(alone.candidates)} candidates, identical: {same}"
    )


def main() -> None:
    if "--one" in sys.argv[1:]:
        one_candidate()
        return
    if "--dask" in sys.argv[1:]:
        on_dask()
        return
    result, wall = grid()
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
