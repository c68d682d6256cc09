"""Realistic report inputs built from the typed contracts: a profile, a run directory, a plan.

The numbers describe one coherent story: a chat service peaking at 42 req/s, one H100 running
Llama-3.1-8B holds 17.4 req/s at ttft p95 <= 2 s, the plan asks for 3 + 1 instances, and a
steady-burst-recovery run shows a burst the server needs about 18 s to recover from
(measured by the load test's own stage summaries).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from contracts.limit import ConstraintVerdict, LimitLevel, LimitResult, LittlesLaw
from contracts.plan import (
    Checks,
    Demand,
    FleetCheck,
    FleetPoint,
    GpuMemory,
    LimitInput,
    Plan,
    PlanInputs,
    QueueingCheck,
    Resources,
    Scenario,
    SloTerm,
)
from contracts.run import (
    RECORD_COLUMNS,
    RunInfo,
    Stage,
    StagePlan,
    StageSummary,
)
from locustfiles.summary import summarize_plan
from planner.capacity.arithmetic import plan_scenario, sensitivity
from planner.capacity.cost import build_cost
from testkit.profiles import make_profile
from testkit.report_profile import build_profile

PEAK_RPS = 42.0
LIMIT_RPS = 17.4
GPU_HOUR_USD = 4.25
PRICE_SOURCE = "table: typical on-demand H100 price"
HEADROOM = 0.2
REDUNDANCY = 1
STAGES = (
    ("steady", "steady", 60.0, 12.0),
    ("burst", "burst", 20.0, 24.0),
    ("recovery", "recovery", 60.0, 6.0),
)

SLO_TTFT_S = 2.0  # the SLO of the fixture: ttft:p95<=2s
RUN_COMMAND = (
    "capplan loadtest --host http://127.0.0.1:8000 --stage-plan steady-burst-recovery "
    "-o runs/chat-h100-sbr"
)


@dataclass(frozen=True)
class FixturePaths:
    profile: Path
    run_dir: Path
    plan: Path
    previous: Path


REFUSED_MESSAGE = "injected fault: too many requests waiting"
TIMEOUT_MESSAGE = "no complete answer within the request timeout (300 s)"


def build_run(
    seed: int = 0, scale: float = 1.0
) -> tuple[RunInfo, list[StageSummary], pl.DataFrame, pl.DataFrame]:
    """A steady-burst-recovery run: run.json, stages.json, records and server metrics.

    `scale` multiplies every rate (the bench uses it for a large records file).
    """
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {name: [] for name in RECORD_COLUMNS}
    t0 = 0.0
    queue_s = 0.0  # seconds of queued work, a crude queue so the burst shows in TTFT
    for name, _role, duration_s, rate in STAGES:
        rate *= scale
        n = int(rng.poisson(rate * duration_s))
        sends = np.sort(rng.uniform(t0, t0 + duration_s, n))
        last = t0
        for i, send in enumerate(sends):
            drain = (send - last) * LIMIT_RPS * scale
            queue_s = max(0.0, queue_s + 1.0 - drain)
            last = send
            ttft = 0.25 + 0.05 * rng.standard_normal() ** 2 + queue_s / (LIMIT_RPS * scale)
            out_tokens = int(rng.lognormal(4.9, 0.9)) + 2
            tpot = 0.018 + 0.004 * rng.random()
            e2e = ttft + tpot * (out_tokens - 1)
            ok = bool(ttft < 7.0 or rng.random() < 0.9)
            rows["stage"].append(name)
            rows["request_id"].append(f"{name}-{i}")
            rows["intended_send_s"].append(float(send))
            rows["sent_s"].append(float(send + 0.0004))
            rows["first_token_s"].append(float(send + ttft) if ok else None)
            rows["end_s"].append(float(send + e2e) if ok else float(send + 30.0))
            rows["schedule_lag_s"].append(0.0004)
            rows["ttft_s"].append(float(ttft) if ok else None)
            rows["tpot_s"].append(float(tpot) if ok else None)
            rows["itl_mean_s"].append(float(tpot) if ok else None)
            rows["itl_max_s"].append(float(tpot * 3) if ok else None)
            rows["itl_gaps_s"].append([float(tpot)] * min(out_tokens - 1, 4) if ok else [])
            rows["e2e_s"].append(float(e2e) if ok else None)
            rows["input_tokens"].append(int(rng.lognormal(6.8, 0.8)) + 1)
            rows["output_tokens"].append(out_tokens if ok else 0)
            rows["tokens_estimated"].append(False)
            rows["ok"].append(ok)
            # failures alternate between HTTP 429 refusals and timeouts
            refused = not ok and i % 2 == 0
            rows["status_code"].append(200 if ok else (429 if refused else 0))
            rows["error_class"].append(None if ok else ("refused" if refused else "timeout"))
            rows["error_message"].append(
                None if ok else (REFUSED_MESSAGE if refused else TIMEOUT_MESSAGE)
            )
        t0 += duration_s
    records = pl.DataFrame(rows, schema=RECORD_COLUMNS)
    plan = StagePlan(
        name="steady-burst-recovery",
        stages=[
            Stage(name=n, role=r, duration_s=d, rate_rps=q * scale)  # type: ignore[arg-type]
            for n, r, d, q in STAGES
        ],
    )
    t = np.arange(0.0, t0, 1.0)
    burst = (t >= 60) & (t < 80)
    after = np.clip(1.0 - (t - 80) / 14.0, 0, 1) * (t >= 80)
    waiting = np.where(burst, (t - 60) * 2.1, 41.0 * after) + rng.poisson(0.5, t.size)
    kv = np.clip(0.5 + 0.43 * burst + 0.4 * after + 0.03 * rng.standard_normal(t.size), 0, 1)
    metrics = pl.DataFrame(
        {
            "t_s": np.concatenate([t, t, t]),
            "name": ["vllm:num_requests_waiting"] * t.size
            + ["vllm:kv_cache_usage_perc"] * t.size
            + ["vllm:num_requests_running"] * t.size,
            "labels": ['model_name="llama-3.1-8b"'] * (3 * t.size),
            "type": ["gauge"] * (3 * t.size),
            "value": np.concatenate([waiting, kv, np.minimum(256, 12 * 4.1 + waiting)]),
        }
    )  # the load test's layout: one row per scraped sample
    run = RunInfo(
        name="chat-h100-sbr",
        command=shlex.split(RUN_COMMAND),
        capplan_version="0.1.0",
        locust_version="2.32.0",
        host="http://127.0.0.1:8000",
        model="llama-3.1-8b",
        endpoint="chat",
        profile_source="profiles/chat.json",
        profile_digest="ab12" * 16,
        seed=seed,
        plan=plan,
        workers=0,
        started_at="2026-11-28T10:00:00Z",
        ended_at="2026-11-28T10:02:20Z",
    )
    # The stage summaries as the load test makes them (recovery curve included).
    summaries = summarize_plan(records, plan, 0.0, server=metrics, slo_ttft_s=SLO_TTFT_S)
    return run, summaries, records, metrics


def build_limit() -> LimitResult:
    """A rate-dimension search: bracketed 4 -> 32, bisected to 17.4 (pass) / 18.3 (fail)."""
    levels = []
    for load, ttft_p95 in [
        (4.0, 0.41),
        (8.0, 0.52),
        (16.0, 1.31),
        (32.0, 9.8),
        (24.0, 4.6),
        (20.0, 2.7),
        (18.3, 2.12),
        (17.4, 1.86),
    ]:
        passed = ttft_p95 <= 2.0
        levels.append(
            LimitLevel(
                load=load,
                stage=f"level-{load:g}",
                requests=int(load * 30),
                completed=int(load * 30) - (0 if passed else int(load)),
                errors_by_class={} if passed else {"refused": int(load)},
                metrics={"ttft_p95_s": ttft_p95, "tpot_p95_s": 0.021 + load / 2000},
                constraints=[
                    ConstraintVerdict(
                        name="ttft:p95",
                        value=ttft_p95,
                        threshold=2.0,
                        margin=2.0 - ttft_p95,
                        passed=passed,
                    )
                ],
                verdict="pass" if passed else "fail",
                achieved_rps=min(load, 19.0),
                mean_e2e_s=4.1 + max(0.0, ttft_p95 - 0.4),
                attainment=max(0.0, min(1.0, 1.0 - max(0.0, ttft_p95 - 1.0) / 10)),
            )
        )
    return LimitResult(
        dimension="rate",
        unit="rps",
        feasible_max=LIMIT_RPS,
        infeasible_min=18.3,
        binding="ttft:p95",
        slo="ttft:p95<=2s",
        tolerance=0.05,
        levels=levels,
        saturation_throughput_rps=19.0,
        littles_law=LittlesLaw(rate_rps=LIMIT_RPS, concurrency=LIMIT_RPS * 5.56, mean_e2e_s=5.56),
        confidence="8 levels, gap 5.2 %",
        target="http://127.0.0.1:8000",
        model="llama-3.1-8b",
        wall_s=262.0,
        recovery_s=14.0,
        sentence="one instance holds 17.4 req/s at ttft p95 <= 2 s; 18.3 req/s fails",
    )


def _scenario(peak: float, limit: float, growth: float) -> Scenario:
    return plan_scenario(peak, "rps", limit, growth, HEADROOM, REDUNDANCY, 1, GPU_HOUR_USD)


def build_plan(
    peak_rps: float = PEAK_RPS,
    limit_rps: float = LIMIT_RPS,
    growth: tuple[float, ...] = (1.0, 1.3, 2.0),
) -> Plan:
    """The plan for the fixture's profile and limit (growth 1.0/1.3/2.0, headroom 20 %, N+1)."""
    scenarios = [_scenario(peak_rps, limit_rps, g) for g in growth]
    first = scenarios[0]
    return Plan(
        name="chat-q1",
        created_at="2026-11-28T11:00:00Z",
        capplan_version="0.1.0",
        instances=first.instances,
        scenarios=scenarios,
        demand=Demand(
            peak_rps=peak_rps,
            peak_definition="p99 of 60s window rates",
            mean_rps=14.0,
            burst_factor=61.0 / peak_rps,
            burst_peak_rps=61.0,
            peak_concurrency=peak_rps * 5.56,
            mean_e2e_s=5.56,
            interarrival_cv=1.38,
        ),
        resources=Resources(
            instances=first.instances,
            tp=1,
            gpus=first.gpus,
            gpu="H100-80GB",
            gpu_memory=GpuMemory(
                capacity_bytes_per_gpu=80 * 1024**3,
                weights_bytes_per_gpu=16_060_000_000,
                kv_bytes_per_token_per_gpu=131_072,
                kv_capacity_tokens=430_000,
                kv_needed_tokens_at_limit=96.7 * 1400,
                kv_headroom_frac=1 - 96.7 * 1400 / 430_000,
                mean_context_tokens=1400.0,
                concurrency_at_limit=96.7,
            ),
            cpu_cores_per_instance=8,
            host_ram_gib_per_instance=64.0,
            cpu_cores_total=8 * first.instances,
            host_ram_gib_total=64.0 * first.instances,
            rule="8 cores and 64 GiB host RAM per GPU",
        ),
        cost=build_cost(scenarios, GPU_HOUR_USD, PRICE_SOURCE),
        checks=Checks(
            queueing=QueueingCheck(
                method="M/G/c, Allen-Cunneen",
                arrival_cv2=1.9,
                service_cv2=0.8,
                instances_poisson=3,
                instances_bursty=4,
                wait_probability=0.21,
                mean_wait_s=0.4,
            ),
            fleet=FleetCheck(
                simulated_s=3600.0,
                rate_rps=peak_rps,
                points=[
                    FleetPoint(
                        instances=n,
                        routing=r,
                        attainment=a,
                        ttft_p95_s=t,
                        meets_slo=t <= 2.0,
                        requests=int(peak_rps * 3600),
                    )
                    for n, r, a, t in [
                        (2, "round_robin", 0.61, 11.2),
                        (3, "round_robin", 0.962, 1.74),
                        (4, "round_robin", 0.994, 0.71),
                        (2, "least_outstanding", 0.66, 9.4),
                        (3, "least_outstanding", 0.975, 1.41),
                        (4, "least_outstanding", 0.997, 0.62),
                    ]
                ],
                verdict="n=3 meets the SLO, n=2 does not",
                wall_s=8.2,
            ),
        ),
        sensitivity=sensitivity(peak_rps, limit_rps, list(growth), [0.1, 0.2, 0.3], REDUNDANCY),
        inputs=PlanInputs(
            profile="profiles/chat.json",
            profile_digest="ab12" * 16,
            limit=LimitInput(
                value=limit_rps,
                unit="rps",
                source="runs/chat-h100/limit.json",
                slo="ttft:p95<=2s",
                mean_e2e_s=5.56,
                binding="ttft:p95",
            ),
            slo="ttft:p95<=2s",
            slo_terms=[SloTerm(metric="ttft", stat="p95", threshold=SLO_TTFT_S)],
            peak_window="60s",
            peak_quantile=0.99,
            growth=list(growth),
            headroom=HEADROOM,
            redundancy=REDUNDANCY,
            gpu="H100-80GB",
            model="llama-3.1-8b",
            tp=1,
            gpu_hour_price_usd=GPU_HOUR_USD,
            price_source=PRICE_SOURCE,
        ),
        sentence="Serve a peak of 42 req/s within ttft p95 <= 2 s on 4 x H100-80GB (3 + 1 spare)",
    )


def write_fixture(root: Path, *, seed: int = 0, scale: float = 1.0) -> FixturePaths:
    """Write profile.json, runs/chat-h100-sbr/, plans/q1.json and plans/q4.json under root."""
    profile = build_profile(seed)
    run, stages, records, metrics = build_run(seed, scale)
    run_dir = root / "runs" / run.name
    run_dir.mkdir(parents=True, exist_ok=True)
    profile_path = root / "profiles" / "chat.json"
    profile_path.parent.mkdir(parents=True, exist_ok=True)
    profile_path.write_text(profile.to_json())
    (run_dir / "run.json").write_text(run.model_dump_json(by_alias=True, indent=2))
    (run_dir / "stages.json").write_text("[" + ",".join(s.model_dump_json() for s in stages) + "]")
    records.write_parquet(run_dir / "records.parquet")
    metrics.write_parquet(run_dir / "server_metrics.parquet")
    # --verify-burst records the recovery of the run's own recovery stage
    limit = build_limit().model_copy(update={"recovery_s": stages[-1].recovery_s})
    (run_dir / "limit.json").write_text(limit.model_dump_json(by_alias=True, indent=2))
    plans = root / "plans"
    plans.mkdir(exist_ok=True)
    plan_path = plans / "q1.json"
    plan_path.write_text(build_plan().model_dump_json(by_alias=True, indent=2))
    previous_path = plans / "q4.json"
    previous = build_plan(peak_rps=31.0, limit_rps=15.1).model_copy(update={"name": "chat-q4"})
    previous_path.write_text(previous.model_dump_json(by_alias=True, indent=2))
    return FixturePaths(profile_path, run_dir, plan_path, previous_path)


def planning_inputs(root: Path) -> dict[str, Path]:
    """What plan, whatif and compare read, written under `root` for CLI tests: `profile` (a
    profile of two request shapes), `run` (a run folder holding `build_limit()`'s limit.json)
    and `root` itself."""
    profile = root / "profile.json"
    profile.write_text(make_profile([(128, 64), (512, 128)]).to_json())
    run = root / "run"
    run.mkdir()
    (run / "limit.json").write_text(build_limit().model_dump_json(by_alias=True))
    return {"profile": profile, "run": run, "root": root}
