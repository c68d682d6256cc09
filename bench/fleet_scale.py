"""Fleet check cost against the fleet's size: the full simulation and the shortcut, 40-4,000 req/s.

For each mean rate of the chat preset (`capplan profile --preset chat --rate-rps R`), the plan's
peak and instance count at `--limit 17.7rps` (`build_plan` without its check), then the plan's
fleet check (n-1, n, n+1 x round-robin and least-outstanding, 300 simulated seconds, the
preset's burst) twice: every instance simulated (`--fleet-full`, the baseline) and the
shortcut (a few instances' share of the traffic, `planner.fleet.sample`). Printed per rate:
wall and CPU seconds of each (CPU: this process and its workers, so a shared machine's load
shows as wall > CPU), the ratio full / shortcut, the instance count each check finds and
the largest relative difference of TTFT/TPOT p95 between them. A full check above
`--full-up-to` req/s is not run (more than 10 minutes a point at 4,000 req/s): its line
gives the estimate the check makes before it starts (`planner.fleet.estimate`), marked so.

    python bench/fleet_scale.py [--rates 40,400,4000] [--full-up-to 400] [--span 300]
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from functools import partial

from contracts.plan import FleetCheck
from planner.capacity.arithmetic import parse_limit
from planner.capacity.plan import PlanOptions, build_plan
from planner.engine import build_engine_config
from planner.fleet.check import fleet_check
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile

SLO = "ttft:p95<=2s"


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the fleet pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(run: Callable[[], FleetCheck]) -> tuple[FleetCheck, float, float]:
    wall0, cpu0 = time.perf_counter(), cpu_s()
    check = run()
    return check, time.perf_counter() - wall0, cpu_s() - cpu0


def worst_p95_diff(a: FleetCheck, b: FleetCheck) -> float:
    by = {(p.instances, p.routing): p for p in b.points}
    worst = 0.0
    for p in a.points:
        q = by.get((p.instances, p.routing))
        for name in ("ttft_p95_s", "tpot_p95_s"):
            x, y = getattr(p, name), getattr(q, name) if q else None
            if x is not None and y:
                worst = max(worst, abs(x - y) / y)
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="40,400,4000", help="mean rates of the chat preset")
    ap.add_argument("--full-up-to", type=float, default=400.0, help="run the full check to here")
    ap.add_argument("--span", type=float, default=300.0, help="simulated seconds a point")
    args = ap.parse_args()
    config = build_engine_config("H100-80GB", "llama-3.1-8b", 1)
    slo = parse_slo(SLO)
    print("mean rps | peak rps | n | check | wall s | CPU s | found | p95 diff | full/short")
    for rate in (float(r) for r in args.rates.split(",")):
        profile = preset_profile("chat", rate_rps=rate)
        options = PlanOptions(profile_path="chat", slo=slo, fleet=False)
        plan = build_plan(profile, parse_limit("17.7rps"), options)
        peak, n = plan.demand.peak_rps, plan.resources.instances
        burst = plan.demand.burst_factor

        check = partial(fleet_check, profile, config, peak, n, slo, args.span, burst_factor=burst)
        short, wall_s, cpu = timed(partial(check, shortcut=True))
        row = f"{rate:8g} | {peak:8.4g} | {n} |"
        print(f"{row} shortcut | {wall_s:6.1f} | {cpu:6.1f} | {short.min_instances_meeting} |")
        if rate <= args.full_up_to:
            full, full_wall, full_cpu = timed(partial(check, shortcut=False))
            print(
                f"{row} full     | {full_wall:6.1f} | {full_cpu:6.1f} | "
                f"{full.min_instances_meeting} | {worst_p95_diff(short, full):.1%} | "
                f"wall {full_wall / wall_s:.1f}x, CPU {full_cpu / cpu:.1f}x"
            )
        else:
            print(
                f"{row} full     | not run: estimated {short.estimated_full_wall_s:.0f} s wall | "
                f"| | | wall {(short.estimated_full_wall_s or 0) / wall_s:.0f}x (estimated)"
            )
        print(
            f"{row}   estimated before the checks ran: shortcut {short.estimated_wall_s:.1f} s, "
            f"full {short.estimated_full_wall_s:.1f} s wall"
        )


if __name__ == "__main__":
    main()
