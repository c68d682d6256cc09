"""Speed of `capplan plan --autoscale` on a 90-day Prometheus-derived profile, and the per-step
model's error against the request-level simulation.

    python bench/autoscale_speed.py [--days 90] [--rps 40] [--keep DIR] [--check]
        [--routing prefix_aware,round_robin]

1. Builds the profile: requests per 15 s scrape drawn from testkit/prom_fleet.py's traffic
   pattern (diurnal, quieter weekends, weekly growth) and turned into the profile's arrivals
   by the Prometheus reader's own statistics (`profiles.prometheus.stats.arrivals_from_steps`:
   clock hours, hour of day, weekday, rate series, as `capplan profile prometheus:URL` stores
   them), lengths from the chat preset. The HTTP fetch is left out: bench/prometheus_speed.py
   times that part.
2. Times, each in its own process, `capplan plan` on it without and with `--autoscale` (the
   fleet check included, as a user runs it) and prints both, their difference and the
   autoscale study's share. Goal (issue 49): the whole plan with autoscaling in at most 60 s
   on 2 cores.
3. With --check, runs the per-step model and the request-level simulation on the busiest
   `--check-hours` of the trace for every default policy and prints attainment and
   replica-hours by both and their differences.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.jsonio import write_model  # noqa: E402
from contracts.plan import Plan  # noqa: E402
from planner.autoscale.check import compare_models  # noqa: E402
from planner.autoscale.policies import DEFAULT_POLICIES, parse_policy  # noqa: E402
from planner.autoscale.run import _targets, fleet_of, slo_terms  # noqa: E402
from planner.autoscale.trace import Trace, build_trace  # noqa: E402
from planner.slo.recorded import plan_slo  # noqa: E402
from profiles.model import Profile, load_profile  # noqa: E402
from profiles.presets import preset_profile  # noqa: E402
from profiles.prometheus.stats import arrivals_from_steps  # noqa: E402
from testkit.prom_fleet import END_EPOCH_S, STEP_S, rate_rps  # noqa: E402

LIMIT, SLO = "4rps", "ttft:p95<=2s"


def make_profile(days: float, mean_rps: float, seed: int) -> Profile:
    """A `days`-long profile with the arrivals the Prometheus reader derives from 15 s counts."""
    rng = np.random.default_rng(seed)
    start = END_EPOCH_S - int(days * 86400)
    t = start + STEP_S * np.arange(int(days * 86400 / STEP_S))
    rates = rate_rps(t, mean_rps, weekend=0.7, weekly_growth=0.02, start_epoch_s=start)
    counts = rng.poisson(rates * STEP_S).astype(np.float64)
    arrivals = arrivals_from_steps(counts, STEP_S, float(start))
    base = preset_profile("chat")
    return base.model_copy(update={"arrivals": arrivals})


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def check(profile: Profile, plan: Plan, hours: float, seed: int) -> None:
    """Both models on the busiest `hours` of the trace, every default policy."""
    fleet = fleet_of(plan)
    trace = build_trace(profile, 60.0, 1.0, np.random.default_rng(seed))
    n = int(hours * 60)
    sums = np.convolve(trace.rate_rps, np.ones(n), "valid")
    first = int(sums.argmax())
    part = Trace(
        step_s=60.0,
        rate_rps=trace.rate_rps[first : first + n],
        day_offset_s=(trace.day_offset_s + first * 60.0) % 86400,
        burst_starts_s=(),
        how="",
    )
    budget, _, _ = slo_terms(plan_slo(plan), fleet.service_s)
    targets = _targets(fleet, part, 2 * fleet.static)
    specs = [None, *(parse_policy(p) for p in DEFAULT_POLICIES)]
    t0 = time.perf_counter()
    pairs = compare_models(
        part,
        specs,
        slots=fleet.slots,
        service_s=fleet.service_s,
        initial=fleet.static,
        targets=targets,
        cold_start_s=plan.autoscale.cold_start_s if plan.autoscale else 240.0,
        wait_budget_s=budget,
        rng=np.random.default_rng(seed),
        kv_per_slot=fleet.kv_at_limit / fleet.slots,
    )
    wall = time.perf_counter() - t0
    print(
        f"\nper-step model vs request-level simulation, busiest {hours:g} h "
        f"({pairs[0].requests:,} requests, {wall:.1f} s for both models x {len(pairs)}):"
    )
    print(
        f"{'policy':>15} {'att steps':>10} {'att req':>8} {'diff':>7} {'rep-h steps':>12} "
        f"{'rep-h req':>10} {'diff':>7}"
    )
    for p in pairs:
        print(
            f"{p.label:>15} {p.steps_attainment:10.4f} {p.requests_attainment:8.4f} "
            f"{p.steps_attainment - p.requests_attainment:+7.4f} {p.steps_replica_h:12.1f} "
            f"{p.requests_replica_h:10.1f} "
            f"{p.steps_replica_h / max(p.requests_replica_h, 1e-9) - 1:+7.1%}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=float, default=90.0)
    ap.add_argument("--rps", type=float, default=40.0, help="mean fleet rate of the pattern")
    ap.add_argument("--keep", type=Path, default=Path("/tmp/capplan-autoscale-bench"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-hours", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--routing", default=None, help="also time --autoscale with --routing LIST (issue 49)"
    )
    args = ap.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    profile = make_profile(args.days, args.rps, args.seed)
    path = args.keep / "profile.json"
    write_model(path, profile, "the profile")
    clock = profile.arrivals.clock_hours
    assert clock is not None
    print(
        f"profile: {args.days:g} days, {len(clock.peak_rps)} clock "
        f"hours, built in {time.perf_counter() - t0:.1f} s -> {path}"
    )
    cli = [
        sys.executable,
        "-m",
        "capplan",
        "plan",
        "--profile",
        str(path),
        "--limit",
        LIMIT,
        "--slo",
        SLO,
    ]
    plain = timed([*cli, "-o", str(args.keep / "plain.json")])
    auto = timed([*cli, "--autoscale", "-o", str(args.keep / "auto.json")])
    print(f"capplan plan:             {plain:6.1f} s")
    print(
        f"capplan plan --autoscale: {auto:6.1f} s  (the study: {auto - plain:.1f} s, "
        f"{(auto - plain) / auto:.0%} of it; goal <= 60 s on 2 cores)"
    )
    if args.routing:
        routed = [*cli, "--autoscale", "--routing", args.routing]
        both = timed([*routed, "-o", str(args.keep / "routed.json")])
        print(f"capplan plan --autoscale --routing {args.routing}: {both:6.1f} s (goal <= 60 s)")
    plan = Plan.model_validate_json((args.keep / "auto.json").read_text())
    assert plan.autoscale is not None
    for o in (plan.autoscale.static, *plan.autoscale.policies):
        print(
            f"  {o.label:>15}: attainment {o.attainment:.4f}, {o.gpu_hours_per_month:,.0f} "
            f"GPU-h/month ({o.cost_vs_static:.0%} of static)"
        )
    print(f"  recommended: {plan.autoscale.recommended}")
    if args.check:
        check(load_profile(path), plan, args.check_hours, args.seed)


if __name__ == "__main__":
    main()
