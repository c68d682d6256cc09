"""Where the wall-speed verify test's TTFT excess comes from: client and proxy, or engine.

`python -m bench.verify_overhead [--steady-s 60] [--out DIR]` runs the setup of
tests/integration/test_verify_nginx.py's wall-speed test (the plan's 3 A10-24GB instances at
2.2 x the engine model's limit, nginx round-robin, speed 1, 60 / 10 / 40 s stages) on
emulators that keep their own per-request timings (testkit.emulator_timelines), and prints
for the judged steady window: the client's TTFT (capplan's records), the servers' TTFT
(handler start to the engine's first token), the engine model in virtual time on the
arrivals and lengths each server logged, and the plan's simulation (its own draws: pooled as
verify.json has it, and one draw at a time).
Client less servers: what Locust, nginx and the process scheduling added; servers less the
model on their arrivals: what the emulator's real-time stepping added; that model less the
plan's simulation: the luck of one draw of arrivals and lengths.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
from typer.testing import CliRunner

from capplan.cli import app
from contracts.plan import Plan
from contracts.rundir import read_records, read_stages
from contracts.verify import Verify
from planner.engine import EngineRequest, build_engine_config
from planner.fleet.check import single_instance_limit
from planner.fleet.sim import simulate_fleet
from planner.slo.spec import parse_slo
from planner.verify.nginx import nginx_balancer
from planner.verify.simulate import plan_engine, simulate_stages
from profiles.model import load_profile, save_profile
from testkit.emulator_timelines import (
    ServerTimeline,
    TimelineEmulator,
    start_timeline_emulator,
)
from testkit.profiles import make_profile
from testkit.verify_truth import steady_window_perf_s

GPU, MODEL, SLO = "A10-24GB", "llama-3.1-8b", "ttft:p95<=1s"


def make_plan(folder: Path) -> tuple[Path, Path]:
    """The wall-speed test's plan: 3 instances at 2.2 x the engine model's limit."""
    rng = np.random.default_rng(0)
    pairs = [(int(rng.integers(200, 800)), int(rng.integers(40, 160))) for _ in range(200)]
    profile = make_profile(pairs, rate_rps=2.0, peak_to_mean_10s=1.5)
    profile_path, plan_path = folder / "profile.json", folder / "plan.json"
    save_profile(profile, profile_path)
    limit = single_instance_limit(profile, build_engine_config(GPU, MODEL), parse_slo(SLO), 300.0)
    result = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile_path), "--limit", f"{limit}rps", "--slo", SLO,
         "--peak-rps", str(round(2.2 * limit, 2)), "--headroom", "0", "--redundancy", "0",
         "--gpu", GPU, "--model", MODEL, "--fleet-span", "200", "-o", str(plan_path)],
    )  # fmt: skip
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return profile_path, plan_path


@contextlib.contextmanager
def emulators(count: int) -> Iterator[list[TimelineEmulator]]:
    started: list[TimelineEmulator] = []
    try:
        for k in range(count):
            started.append(start_timeline_emulator(GPU, MODEL, seed=k))
        yield started
    finally:
        for emulator in started:
            emulator.stop()


def replayed(
    logs: list[tuple[list[ServerTimeline], float, int]], window: tuple[float, float]
) -> np.ndarray:
    """Each server's logged requests (arrival, prompt and output tokens) through the engine
    model in virtual time, one engine each; the TTFTs of those arriving inside `window`."""
    config = build_engine_config(GPU, MODEL)
    ttfts = []
    for rows, _, _ in logs:
        done = sorted((t for t in rows if t.first_token_s is not None), key=lambda t: t.arrival_s)
        requests = [
            EngineRequest(f"r{k}", t.prompt_tokens, t.output_tokens, t.arrival_s)
            for k, t in enumerate(done)
        ]
        run = simulate_fleet(requests, config, 1, "round_robin")
        arrival_s = np.asarray(run.arrival_s)
        inside = (arrival_s >= window[0]) & (arrival_s < window[1])
        ttfts.append(np.asarray(run.ttft_s)[inside])
    return np.concatenate(ttfts)


def single_draws(folder: Path, verify: Verify, warmup_s: float, draws: int) -> str:
    """The plan's simulation of the steady window one draw at a time (seeds 0..draws-1): how
    far one sample's p95 and p99 stray from the pooled figure verify.json compares with."""
    plan = Plan.model_validate_json((folder / "plan.json").read_text())
    profile = load_profile(folder / "profile.json")
    steady_s = verify.stages.stages[0].duration_s
    found = []
    for seed in range(draws):
        run = simulate_stages(
            profile, plan_engine(plan), verify.stages, 3, "round_robin", seed=seed, repeats=1
        )
        kept = run.filter(
            (pl.col("intended_send_s") >= warmup_s) & (pl.col("intended_send_s") < steady_s)
        )
        found.append(np.quantile(kept["ttft_s"].drop_nulls().to_numpy(), [0.95, 0.99]))
    p95, p99 = np.array(found).T
    return (
        f"{draws} single draws of the plan's simulation: p95 {p95.min():.4f}-{p95.max():.4f} "
        f"(sd {p95.std(ddof=1):.4f}), p99 {p99.min():.4f}-{p99.max():.4f} "
        f"(sd {p99.std(ddof=1):.4f}) s"
    )


def _row(label: str, values: np.ndarray) -> str:
    p50, p95, p99 = np.quantile(values, [0.5, 0.95, 0.99])
    return (
        f"{label:<38} p50 {p50:.4f}  p95 {p95:.4f}  p99 {p99:.4f}  mean {values.mean():.4f} s  "
        f"(n={values.size})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steady-s", type=float, default=60.0)
    parser.add_argument("--draws", type=int, default=12, help="single simulation draws to show")
    parser.add_argument("--out", type=Path, default=None, help="keep the run here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="capplan-verify-overhead-") as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        profile_path, plan_path = make_plan(folder)
        out = folder / "n"
        with emulators(3) as servers:
            urls = [s.url for s in servers]
            with nginx_balancer(urls) as lb:
                result = CliRunner().invoke(
                    app,
                    ["verify", "--plan", str(plan_path), "--profile", str(profile_path),
                     "--host", lb, "--instances", ",".join(urls), "--steady-duration",
                     str(args.steady_s), "--burst-duration", "10", "--recovery-timeout", "40",
                     "-o", str(out)],
                )  # fmt: skip
            logs = [s.timelines() for s in servers]
        print(result.output.strip().splitlines()[-2])
        verify = Verify.model_validate_json((out / "verify.json").read_text())
        steady = next(p for p in verify.phases if p.role == "steady")
        stage = next(s for s in read_stages(out) if s.role == "steady")
        begin, end = steady_window_perf_s(out, steady.warmup_s)
        server = np.array(
            [t.ttft_s for rows, _, _ in logs for t in rows
             if t.ttft_s is not None and begin <= t.arrival_s < end]
        )  # fmt: skip
        records = read_records(out).filter(
            (pl.col("intended_send_s") >= stage.start_s + steady.warmup_s)
            & (pl.col("intended_send_s") < stage.end_s)
            & pl.col("ok")
        )
        client = records["ttft_s"].drop_nulls().to_numpy()
        print(f"steady window: {stage.start_s + steady.warmup_s:.1f}-{stage.end_s:.1f} s")
        print(_row("client TTFT (capplan records)", client))
        print(_row("servers' TTFT (handler to 1st token)", server))
        print(_row("engine model on the logged arrivals", replayed(logs, (begin, end))))
        sim = steady.simulated
        if sim is not None:
            print(f"{'the plan simulated (verify.json)':<38} p95 {sim.ttft_p95_s:.4f}  "
                  f"p99 {sim.ttft_p99_s:.4f} s (its own draws, pooled)")  # fmt: skip
        print(single_draws(folder, verify, steady.warmup_s, args.draws))
        lag = ", ".join(f"{behind:.3f} s in {resyncs} resyncs" for _, behind, resyncs in logs)
        print(f"engine time lost by the emulators (behind): {lag}")
        (out / "server_timelines.json").write_text(
            json.dumps([[t.__dict__ for t in rows] for rows, _, _ in logs]) + "\n"
        )


if __name__ == "__main__":
    main()
