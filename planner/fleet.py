"""The fleet simulator: a profile's traffic replayed in virtual time against n engine instances.

One event loop runs over the arrivals and every instance's next step end (a heap); a request
goes to an instance chosen by the router (`round_robin` or `least_outstanding`: fewest requests
routed and not yet finished, lowest index on a tie) and joins that instance's next step. The
engines are `planner.engine.Engine`, the same model the emulator runs in real time.

Arrivals (`arrival_kind`):
- `gamma`: a renewal process with gamma inter-arrival times at the planned rate and the
  profile's inter-arrival CV (shape 1/CV^2), so the short-scale burstiness of the trace comes
  along; the hour-scale swing is what the planning peak already takes. The plan check adds
  one 10 s window at the profile's burst factor (a time warp of the same process).
- `poisson`: exponential inter-arrival times (CV 1), for comparison.
Request shapes come from the load test's own `profiles.workload.WorkloadStream` (the profile's
length pairs, shared system prompts, sessions), with prefix-cache block hashes for shared
content, so the fleet sees the traffic the limit was measured with.

Verdicts are `planner.slo.evaluate` over the requests arriving after a warm-up (an empty fleet
is optimistic): the same verdict the limit search gives a measured stage. `calibrate` fits the
engine's efficiency factors to a limit.json's measured levels.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from planner.engine import Engine, EngineConfig, EngineRequest
from planner.errors import ConfigError
from planner.limit_schema import LimitResult
from planner.plan_schema import FleetCheck, FleetPoint
from planner.slo import Slo, evaluate, parse_slo
from profiles.model import Profile
from profiles.workload import MessageShape, WorkloadStream

Routing = Literal["round_robin", "least_outstanding"]
ROUTINGS: tuple[Routing, ...] = ("round_robin", "least_outstanding")
ArrivalKind = Literal["gamma", "poisson"]
BURST_WINDOW_S = 10.0
SIMULATED_METRICS = ("ttft", "tpot", "e2e")


# ----------------------------------------------------------------------------- traffic


@dataclass(frozen=True)
class BurstWindow:
    """A window of the span where the arrival rate is `factor` x the base rate."""

    start_s: float
    duration_s: float
    factor: float


def arrival_times_s(
    rate_rps: float,
    cv: float,
    duration_s: float,
    rng: np.random.Generator,
    burst: BurstWindow | None = None,
) -> np.ndarray:
    """Arrival times in [0, duration_s) of a gamma renewal process with mean rate and CV.

    With `burst`, the process is time-warped so the rate is `burst.factor` x `rate_rps`
    inside the window (the gaps keep their CV in operational time).
    Raises ConfigError for a non-positive rate, CV or duration.
    """
    if burst is not None:
        b0 = min(max(burst.start_s, 0.0), duration_s)
        b1 = min(b0 + burst.duration_s, duration_s)
        knots_t = np.array([0.0, b0, b1, duration_s])
        knots_u = np.cumsum([0.0, b0, (b1 - b0) * burst.factor, duration_s - b1])
        # Operational time runs `factor` times faster inside the window.
        operational = arrival_times_s(rate_rps, cv, float(knots_u[-1]), rng)
        return np.interp(operational, knots_u, knots_t)
    if not (rate_rps > 0 and cv > 0 and duration_s > 0):
        raise ConfigError(
            f"arrivals need a positive rate, CV and duration (got {rate_rps}, {cv}, {duration_s})"
        )
    shape = 1.0 / cv**2
    expected = rate_rps * duration_s
    n = int(expected + 6 * math.sqrt(expected) * max(cv, 1.0) + 16)
    gaps = rng.gamma(shape, 1.0 / (rate_rps * shape), size=n)
    times = np.cumsum(gaps)
    while times[-1] < duration_s:  # rare: draw more until the span is covered
        more = np.cumsum(rng.gamma(shape, 1.0 / (rate_rps * shape), size=n)) + times[-1]
        times = np.concatenate([times, more])
    return times[times < duration_s]


def shape_block_hashes(
    messages: Sequence[MessageShape], block_tokens: int, prompt_tokens: int
) -> tuple[int, ...]:
    """Chained hashes of a request shape's full prompt blocks, without any text.

    A block's content is the run of (message text key, token offsets) it covers, so two
    requests whose prompts start with the same messages (a shared system prompt, the earlier
    turns of a session) share their leading block hashes, as their token ids would.
    """
    hashes: list[int] = []
    wanted = prompt_tokens // block_tokens
    prev = 0
    block: list[tuple[int, int, int, int]] = []
    fill = 0
    for message in messages:
        kind, ident = message.text_key
        offset = 0
        while offset < message.tokens and len(hashes) < wanted:
            take = min(block_tokens - fill, message.tokens - offset)
            block.append((kind, ident, offset, offset + take))
            fill += take
            offset += take
            if fill == block_tokens:
                prev = hash((prev, tuple(block)))
                hashes.append(prev)
                block, fill = [], 0
    return tuple(hashes)


def profile_requests(
    profile: Profile,
    rate_rps: float,
    duration_s: float,
    rng: np.random.Generator,
    max_model_len: int,
    arrival_kind: ArrivalKind = "gamma",
    burst: BurstWindow | None = None,
    block_tokens: int = 16,
) -> list[EngineRequest]:
    """Requests at `rate_rps` for `duration_s`, shaped as the load test shapes them.

    Shapes come from `profiles.workload.WorkloadStream` (the load test's own stream): lengths
    from the profile's sample pairs, its shared system prompts with their request shares, and
    its multi-turn sessions; shared content gets shared prefix-cache block hashes
    (`shape_block_hashes`). `burst` raises the rate inside one window (`arrival_times_s`).
    Lengths are clipped to the engine's `max_model_len` (prompt first kept, output shortened).
    Raises ConfigError when the profile has no sample pairs or an unknown arrival kind.
    """
    if not profile.lengths.sampler.pairs:
        raise ConfigError("the profile has no (input, output) sample pairs to draw lengths from")
    if arrival_kind not in ("gamma", "poisson"):
        raise ConfigError(f"unknown arrival kind {arrival_kind!r}; known: gamma, poisson")
    cv = _arrival_cv(profile, arrival_kind)
    times = arrival_times_s(rate_rps, cv, duration_s, rng, burst)
    stream = WorkloadStream(profile, seed=int(rng.integers(2**31)))
    out: list[EngineRequest] = []
    for k, t in enumerate(times.tolist()):
        shape = next(stream)
        prompt = max(1, min(shape.input_tokens, max_model_len - 1))
        output = max(1, min(shape.output_tokens, max_model_len - prompt))
        shared = shape.prefix_index is not None or shape.session_id is not None
        hashes = shape_block_hashes(shape.messages, block_tokens, prompt) if shared else ()
        out.append(EngineRequest(str(k), prompt, output, t, hashes))
    return out


# ----------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class FleetRun:
    """Per-request results of one fleet simulation (arrays in arrival order; NaN = never)."""

    instances: int
    routing: Routing
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    output_tokens: np.ndarray
    instance: np.ndarray
    simulated_s: float
    wall_s: float
    steps: int


def simulate_fleet(
    requests: Sequence[EngineRequest],
    config: EngineConfig,
    instances: int,
    routing: Routing = "least_outstanding",
) -> FleetRun:
    """Replay `requests` (any order) against `instances` engines in virtual time.

    Runs until every request has finished. Raises ConfigError for fewer than one instance or
    an unknown routing.
    """
    if instances < 1:
        raise ConfigError(f"the fleet needs at least one instance, got {instances}")
    if routing not in ROUTINGS:
        raise ConfigError(f"unknown routing {routing!r}; known: {', '.join(ROUTINGS)}")
    wall0 = time.perf_counter()
    fast = config.model_copy(update={"record_token_times": False})
    engines = [Engine(fast, token_events=False) for _ in range(instances)]
    order = sorted(range(len(requests)), key=lambda k: requests[k].arrival_s)
    reqs = [requests[k] for k in order]
    index = {r.request_id: k for k, r in enumerate(reqs)}
    n = len(reqs)
    arrival = np.array([r.arrival_s for r in reqs], dtype=float)
    ttft = np.full(n, np.nan)
    tpot = np.full(n, np.nan)
    e2e = np.full(n, np.nan)
    out_tokens = np.zeros(n, dtype=np.int64)
    where = np.full(n, -1, dtype=np.int64)
    outstanding = [0] * instances
    pending: list[tuple[float, int]] = []  # (step end, instance) of instances mid-step
    results: list[object] = [None] * instances
    steps = 0
    last_end = 0.0

    def start_step(i: int, now: float) -> None:
        nonlocal steps
        res = engines[i].step(now)
        if res.duration_s > 0:
            steps += 1
            results[i] = res
            heapq.heappush(pending, (res.end_s, i))
        else:
            results[i] = None  # nothing schedulable: idle until the next arrival

    k = 0
    rr = 0
    while k < n or pending:
        if k < n and (not pending or arrival[k] <= pending[0][0]):
            req = reqs[k]
            now = req.arrival_s
            if routing == "round_robin":
                i = rr
                rr = (rr + 1) % instances
            else:
                i = min(range(instances), key=outstanding.__getitem__)
            engine = engines[i]
            engine.add_request(req, now)
            outstanding[i] += 1
            where[k] = i
            k += 1
            if results[i] is None:
                start_step(i, now)
            continue
        end, i = heapq.heappop(pending)
        last_end = end
        res = results[i]
        engine = engines[i]
        for ev in res.events:  # type: ignore[attr-defined]
            if ev.kind == "finished":
                tl = engine.timeline(ev.request_id)
                j = index[ev.request_id]
                ttft[j] = tl.first_token_s - tl.arrival_s  # type: ignore[operator]
                e2e[j] = tl.last_token_s - tl.arrival_s  # type: ignore[operator]
                if tl.output_tokens > 1:
                    tpot[j] = (tl.last_token_s - tl.first_token_s) / (tl.output_tokens - 1)  # type: ignore[operator]
                out_tokens[j] = tl.output_tokens
                outstanding[i] -= 1
                engine.forget(ev.request_id)
        if engine.has_work():
            start_step(i, end)
        else:
            results[i] = None
    return FleetRun(
        instances=instances,
        routing=routing,
        arrival_s=arrival,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        output_tokens=out_tokens,
        instance=where,
        simulated_s=last_end,
        wall_s=time.perf_counter() - wall0,
        steps=steps,
    )


# ----------------------------------------------------------------------------- SLO


@dataclass(frozen=True)
class FleetVerdict:
    attainment: float
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    e2e_p95_s: float | None
    meets_slo: bool
    requests: int


def simulator_slo_problem(slo: Slo) -> str | None:
    """Why the simulator cannot judge `slo` (it yields ttft, tpot and e2e), or None."""
    metrics = {c.metric for c in slo.percentiles} | {t.metric for t in slo.request_thresholds}
    missing = sorted(metrics - set(SIMULATED_METRICS))
    if missing:
        return (
            f"the SLO names {', '.join(missing)}, which the fleet simulator does not produce "
            f"(it yields {', '.join(SIMULATED_METRICS)})"
        )
    return None


def run_records(run: FleetRun) -> pl.DataFrame:
    """The run as per-request records in planner.slo's columns (ok = finished)."""
    return pl.DataFrame(
        {
            "arrival_s": run.arrival_s,
            "ttft_s": run.ttft_s,
            "tpot_s": run.tpot_s,
            "e2e_s": run.e2e_s,
            "ok": ~np.isnan(run.e2e_s),
        }
    )


def judge(run: FleetRun, slo: Slo, warmup_s: float) -> FleetVerdict:
    """`planner.slo.evaluate` over the requests arriving after `warmup_s`.

    The same verdict the limit search gives a measured stage: percentiles over the finished
    requests (linear interpolation), attainment over all, a request that never finished is
    an error. Raises ConfigError for an SLO the simulator cannot judge (see
    `simulator_slo_problem`).
    """
    problem = simulator_slo_problem(slo)
    if problem is not None:
        raise ConfigError(problem)
    span = max(float(run.simulated_s), float(run.arrival_s.max()) if len(run.arrival_s) else 0.0)
    evaluation = evaluate(
        run_records(run),
        slo,
        duration_s=max(span, warmup_s + 1e-6),
        warmup_s=warmup_s,
        start_s=0.0,
        resamples=1,  # the verdict only: the fleet check reports no bootstrap intervals
    )
    m = evaluation.metrics
    return FleetVerdict(
        attainment=evaluation.attainment or 0.0,
        ttft_p95_s=m.get("ttft_p95_s"),
        tpot_p95_s=m.get("tpot_p95_s"),
        e2e_p95_s=m.get("e2e_p95_s"),
        meets_slo=evaluation.passed,
        requests=evaluation.scheduled,
    )


# ----------------------------------------------------------------------------- the plan check


def fleet_check(
    profile: Profile,
    config: EngineConfig,
    rate_rps: float,
    instances: int,
    slo: Slo,
    duration_s: float,
    rng_seed: int = 0,
    warmup_frac: float = 0.1,
    routings: Sequence[Routing] = ROUTINGS,
    arrival_kind: ArrivalKind = "gamma",
    burst_factor: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> FleetCheck:
    """Simulate the planned peak against n-1, n and n+1 instances under each routing.

    The same requests (one seeded draw) go to every fleet size and routing, so the points
    differ only in the fleet. With `burst_factor` > 1, one 10 s window starting at 40 % of
    the span runs at that multiple of the rate (the profile's 10 s peak over its planning
    peak), so the verdict includes a burst. Raises ConfigError for a non-positive rate or
    duration.
    """
    wall0 = time.perf_counter()
    rng = np.random.default_rng(rng_seed)
    burst = None
    if burst_factor is not None and burst_factor > 1.0:
        burst = BurstWindow(0.4 * duration_s, min(BURST_WINDOW_S, 0.5 * duration_s), burst_factor)
    requests = profile_requests(
        profile,
        rate_rps,
        duration_s,
        rng,
        config.effective_max_model_len,
        arrival_kind,
        burst,
        block_tokens=config.block_tokens,
    )
    warmup_s = duration_s * warmup_frac
    points: list[FleetPoint] = []
    simulated = 0.0

    def point(size: int, routing: Routing) -> FleetPoint:
        nonlocal simulated
        run = simulate_fleet(requests, config, size, routing)
        simulated += run.simulated_s
        verdict = judge(run, slo, warmup_s)
        if progress is not None:
            progress(
                f"fleet n={size} {routing}: attainment {verdict.attainment:.1%}, "
                f"meets SLO: {verdict.meets_slo} ({run.wall_s:.1f} s wall)"
            )
        return FleetPoint(
            instances=size,
            routing=routing,
            attainment=verdict.attainment,
            ttft_p95_s=verdict.ttft_p95_s,
            tpot_p95_s=verdict.tpot_p95_s,
            e2e_p95_s=verdict.e2e_p95_s,
            meets_slo=verdict.meets_slo,
            requests=verdict.requests,
        )

    for size in sorted({max(1, instances - 1), instances, instances + 1}):
        points.extend(point(size, routing) for routing in routings)
    # When n+1 still fails, look further up (least-outstanding routing) for the fewest
    # instances that meet the SLO, up to twice the plan.
    needed = min_instances_meeting(points)
    size = instances + 2
    while needed is None and size <= max(2 * instances, instances + 2):
        extra = point(size, "least_outstanding")
        points.append(extra)
        if extra.meets_slo:
            needed = size
        size += 1
    return FleetCheck(
        simulated_s=duration_s,
        rate_rps=rate_rps,
        points=points,
        min_instances_meeting=needed,
        verdict=fleet_verdict(points, instances),
        wall_s=time.perf_counter() - wall0,
        slo=slo.text,
        arrivals=(
            f"{arrival_kind} renewal process at {rate_rps:.4g} req/s, inter-arrival CV "
            f"{_arrival_cv(profile, arrival_kind):.3g}; lengths drawn from the profile's "
            f"{len(profile.lengths.sampler.pairs)} sample pairs; seed {rng_seed}; first "
            f"{warmup_s:g} s left out as warm-up"
            + (
                ""
                if burst is None
                else f"; a {burst.duration_s:g} s burst at {burst.factor:.3g}x the rate from "
                f"t={burst.start_s:g} s"
            )
        ),
        engine=(
            f"{config.gpu.name} x {config.model.name} tp={config.tp}, mfu {config.mfu:.3g}, "
            f"mbu {config.mbu:.3g}, step overhead {config.step_overhead_s * 1e3:.3g} ms "
            f"({config.calibration_source})"
        ),
    )


def _arrival_cv(profile: Profile, arrival_kind: ArrivalKind) -> float:
    return (profile.arrivals.interarrival_cv or 1.0) if arrival_kind == "gamma" else 1.0


def min_instances_meeting(points: Sequence[FleetPoint]) -> int | None:
    """The fewest simulated instances meeting the SLO under some routing, when more also do."""
    sizes = sorted({p.instances for p in points})
    meeting = {p.instances for p in points if p.meets_slo}
    for k, size in enumerate(sizes):
        if all(s in meeting for s in sizes[k:]):
            return size
    return None


def fleet_verdict(points: Sequence[FleetPoint], instances: int) -> str:
    """One sentence: does n meet the SLO under every routing, and does n-1 fall short?"""

    def meets(size: int) -> bool | None:
        got = [p.meets_slo for p in points if p.instances == size]
        return all(got) if got else None

    at_n, below = meets(instances), meets(instances - 1)
    if at_n is None:
        return f"n={instances} was not simulated"
    if not at_n:
        best = [p.routing for p in points if p.instances == instances and p.meets_slo]
        how = f" (only with {', '.join(best)} routing)" if best else ""
        needed = min_instances_meeting(points)
        more = f"; the simulation needs n={needed}" if needed is not None else ""
        return f"n={instances} does NOT meet the SLO in simulation{how}: plan more instances{more}"
    if below is None:
        return f"n={instances} meets the SLO in simulation"
    if below:
        return (
            f"n={instances} meets the SLO, and so does n-1={instances - 1}: the headroom and "
            f"redundancy are buffer above the simulated need"
        )
    return f"n={instances} meets the SLO, n-1={instances - 1} does not"


def single_instance_limit(
    profile: Profile,
    config: EngineConfig,
    slo: Slo,
    duration_s: float,
    rng_seed: int = 0,
    rel_tol: float = 0.02,
    arrival_kind: ArrivalKind = "gamma",
) -> float:
    """The highest rate (req/s) one simulated instance carries within `slo`, by bisection.

    Each probe replays the profile's traffic at a rate for `duration_s` (10 % warm-up left out).
    Raises RunError when even a tiny rate fails the SLO.
    """
    from planner.errors import RunError

    def meets(rate: float) -> bool:
        rng = np.random.default_rng(rng_seed)
        reqs = profile_requests(
            profile,
            rate,
            duration_s,
            rng,
            config.effective_max_model_len,
            arrival_kind,
            block_tokens=config.block_tokens,
        )
        return judge(simulate_fleet(reqs, config, 1), slo, 0.1 * duration_s).meets_slo

    lo, hi = 0.0, 1.0
    while meets(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e5:
            raise RunError("the simulated instance meets the SLO at any rate tried (> 1e5 req/s)")
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2.0
        if meets(mid):
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        raise RunError(f"one simulated instance fails the SLO {slo.text!r} even at {hi:.3g} req/s")
    return lo


def closed_loop_run(
    profile: Profile,
    config: EngineConfig,
    users: int,
    duration_s: float,
    rng_seed: int = 0,
) -> FleetRun:
    """One instance holding `users` requests in flight for `duration_s` (a closed loop).

    Each finished request is replaced at once by the next shape of the load test's
    `WorkloadStream` (lengths, shared prompts, sessions), as users without think time
    would. Requests still running at the end are left out (a closed loop has no backlog).
    Raises ConfigError for users < 1.
    """
    if users < 1:
        raise ConfigError(f"a closed loop needs at least one user, got {users}")
    wall0 = time.perf_counter()
    if not profile.lengths.sampler.pairs:
        raise ConfigError("the profile has no (input, output) sample pairs to draw lengths from")
    stream = WorkloadStream(profile, seed=rng_seed)
    bt = config.block_tokens
    max_len = config.effective_max_model_len
    engine = Engine(config.model_copy(update={"record_token_times": False}), token_events=False)
    rows: list[tuple[float, float, float, float, int]] = []
    count = 0

    def add(now: float) -> None:
        nonlocal count
        shape = next(stream)
        prompt = max(1, min(shape.input_tokens, max_len - 1))
        output = max(1, min(shape.output_tokens, max_len - prompt))
        shared = shape.prefix_index is not None or shape.session_id is not None
        hashes = shape_block_hashes(shape.messages, bt, prompt) if shared else ()
        engine.add_request(EngineRequest(str(count), prompt, output, now, hashes), now)
        count += 1

    for _ in range(users):
        add(0.0)
    now, steps = 0.0, 0
    while now < duration_s:
        res = engine.step(now)
        if res.duration_s <= 0:
            break  # nothing schedulable: cannot happen with requests that fit
        steps += 1
        now = res.end_s
        for ev in res.events:
            if ev.kind == "finished":
                tl = engine.timeline(ev.request_id)
                ttft = tl.ttft_s if tl.ttft_s is not None else math.nan
                tpot = tl.tpot_s if tl.tpot_s is not None else math.nan
                e2e = tl.e2e_s if tl.e2e_s is not None else math.nan
                rows.append((tl.arrival_s, ttft, tpot, e2e, tl.output_tokens))
                engine.forget(ev.request_id)
                add(now)
    data = np.array(rows, dtype=float).reshape(-1, 5)
    return FleetRun(
        instances=1,
        routing="round_robin",
        arrival_s=data[:, 0],
        ttft_s=data[:, 1],
        tpot_s=data[:, 2],
        e2e_s=data[:, 3],
        output_tokens=data[:, 4].astype(np.int64),
        instance=np.zeros(len(data), dtype=np.int64),
        simulated_s=now,
        wall_s=time.perf_counter() - wall0,
        steps=steps,
    )


# ----------------------------------------------------------------------------- calibration

# Latency metrics a limit.json level may carry that one simulated instance also yields.
_CAL_METRICS: dict[str, tuple[str, float | None]] = {
    "ttft_p50_s": ("ttft", 0.50),
    "ttft_p95_s": ("ttft", 0.95),
    "ttft_p99_s": ("ttft", 0.99),
    "ttft_mean_s": ("ttft", None),
    "tpot_p50_s": ("tpot", 0.50),
    "tpot_p95_s": ("tpot", 0.95),
    "tpot_p99_s": ("tpot", 0.99),
    "tpot_mean_s": ("tpot", None),
    "e2e_p50_s": ("e2e", 0.50),
    "e2e_p95_s": ("e2e", 0.95),
    "e2e_mean_s": ("e2e", None),
}
# Search box of the efficiency factors (log-uniform design): mfu, mbu, step overhead (s).
_CAL_BOUNDS = ((0.1, 1.0), (0.2, 1.0), (2e-4, 2e-2))
# The limit search leaves out the first 20 % of each level by default; so do calibration runs.
_CAL_WARMUP = 0.2


@dataclass(frozen=True)
class MeasuredLevel:
    """One measured load level: the load (req/s or users) and its latency metrics (seconds).

    `judged_s` is the measured time per run after warm-up (None when the level does not tell),
    `runs` how many runs were pooled.
    """

    load: float
    metrics: dict[str, float]
    judged_s: float | None = None
    runs: int = 1


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiency factors and how well one simulated instance then matches the levels."""

    mfu: float
    mbu: float
    step_overhead_s: float
    mean_rel_error: float
    max_rel_error: float
    levels: int
    metrics: tuple[str, ...]
    default_mean_rel_error: float
    limit_reproduced: bool | None = None

    def as_dict(self) -> dict[str, float]:
        return {
            "mfu": self.mfu,
            "mbu": self.mbu,
            "step_overhead_s": self.step_overhead_s,
            "mean_rel_error": self.mean_rel_error,
            "max_rel_error": self.max_rel_error,
            "default_mean_rel_error": self.default_mean_rel_error,
            "levels": float(self.levels),
            **(
                {}
                if self.limit_reproduced is None
                else {"limit_reproduced": float(self.limit_reproduced)}
            ),
        }


def level_metrics(
    profile: Profile,
    config: EngineConfig,
    load: float,
    dimension: Literal["rate", "concurrency"],
    duration_s: float,
    rng_seed: int = 0,
    runs: int = 1,
    warmup_frac: float = 0.1,
) -> dict[str, float]:
    """The `_CAL_METRICS` of one simulated instance at `load` (open loop rate or closed loop).

    `runs` independent runs (seeds rng_seed, rng_seed + 1, ...) are pooled, as the limit
    search pools repeated measurements of a level; the first `warmup_frac` of each is left out.
    """
    pooled: dict[str, list[np.ndarray]] = {"ttft": [], "tpot": [], "e2e": []}
    for r in range(max(1, runs)):
        if dimension == "rate":
            reqs = profile_requests(
                profile,
                load,
                duration_s,
                np.random.default_rng(rng_seed + r),
                config.effective_max_model_len,
                block_tokens=config.block_tokens,
            )
            run = simulate_fleet(reqs, config, 1)
        else:
            run = closed_loop_run(profile, config, max(1, round(load)), duration_s, rng_seed + r)
        keep = run.arrival_s >= warmup_frac * duration_s
        pooled["ttft"].append(run.ttft_s[keep])
        pooled["tpot"].append(run.tpot_s[keep])
        pooled["e2e"].append(run.e2e_s[keep])
    out: dict[str, float] = {}
    for name, (metric, q) in _CAL_METRICS.items():
        v = np.concatenate(pooled[metric])
        v = v[~np.isnan(v)]
        if len(v):
            out[name] = float(np.mean(v) if q is None else np.quantile(v, q))
    return out


def measured_levels(result: LimitResult) -> list[MeasuredLevel]:
    """The limit.json levels that carry latency metrics the simulator can reproduce.

    Overloaded levels far above the limit (latency dominated by a growing queue) teach the
    factors nothing, so levels above the lowest failing load are left out.
    """
    cap = result.infeasible_min if result.infeasible_min is not None else math.inf
    out: list[MeasuredLevel] = []
    for level in result.levels:
        if level.load > cap or level.load <= 0:
            continue
        metrics = {
            k: float(v)
            for k, v in level.metrics.items()
            if k in _CAL_METRICS and v is not None and v > 0
        }
        if level.mean_e2e_s and "e2e_mean_s" not in metrics:
            metrics["e2e_mean_s"] = level.mean_e2e_s
        runs = level.repeats + 1
        # Requests per run over the rate they arrived at: the seconds each run was judged.
        rate = level.load if result.dimension == "rate" else level.achieved_rps
        judged = level.requests / runs / rate if rate else None
        if metrics:
            out.append(MeasuredLevel(level.load, metrics, judged, runs))
    return sorted(out, key=lambda m: m.load)


def _errors(levels: Sequence[MeasuredLevel], simulated: Sequence[dict[str, float]]) -> list[float]:
    out = []
    for level, sim in zip(levels, simulated, strict=True):
        for name, value in level.metrics.items():
            got = sim.get(name)
            out.append(abs(got - value) / value if got is not None else 1.0)
    return out


def calibrate(
    profile: Profile,
    config: EngineConfig,
    result: LimitResult,
    duration_s: float = 60.0,
    design_points: int = 16,
    rng_seed: int = 0,
) -> tuple[EngineConfig, Calibration]:
    """Fit mfu, mbu and step overhead so one simulated instance reproduces the measured levels.

    Method: simulate every measured level at `design_points` factor settings (a scrambled
    Sobol design, log-uniform within `_CAL_BOUNDS`); fit a scikit-learn regression (quadratic
    features of the log factors and log load, ridge) of each log metric; minimise the squared
    log error between the regression and the measured metrics over the factors; then simulate
    the levels once more with the fitted factors and report the relative error per metric
    (mean and max), next to the error of the uncalibrated config.
    Each level is simulated as it was measured: as long as it was held (`duration_s` when
    the level does not tell) and pooled over as many runs (at most 3), with a 20 % warm-up.
    Raises RunError when the limit.json has no level with latency metrics.
    """
    from scipy.optimize import minimize
    from scipy.stats import qmc
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    from planner.errors import RunError

    levels = measured_levels(result)
    if not levels:
        raise RunError("the limit.json has no level with latency metrics to calibrate against")
    names = sorted({n for lv in levels for n in lv.metrics})
    lo = np.log([b[0] for b in _CAL_BOUNDS])
    hi = np.log([b[1] for b in _CAL_BOUNDS])

    def with_factors(f: np.ndarray) -> EngineConfig:
        return config.model_copy(
            update={"mfu": float(f[0]), "mbu": float(f[1]), "step_overhead_s": float(f[2])}
        )

    def simulate_levels(cfg: EngineConfig) -> list[dict[str, float]]:
        # Each level as it was measured: as long (a short level has not built its steady
        # queue yet) and pooled over as many runs, with the limit search's 20 % warm-up.
        out = []
        for lv in levels:
            span = _level_span_s(lv, duration_s)
            out.append(
                level_metrics(
                    profile,
                    cfg,
                    lv.load,
                    result.dimension,
                    span,
                    rng_seed,
                    runs=min(lv.runs, 3),
                    warmup_frac=_CAL_WARMUP,
                )
            )
        return out

    def fit(design: np.ndarray, box_lo: np.ndarray, box_hi: np.ndarray) -> np.ndarray:
        """Regress each log metric on the factors and load; minimise the log error."""
        rows_x: list[list[float]] = []
        rows_y: dict[str, list[tuple[int, float]]] = {n: [] for n in names}
        for factors in design:
            sims = simulate_levels(with_factors(factors))
            for lv, sim in zip(levels, sims, strict=True):
                row = len(rows_x)
                rows_x.append([*np.log(factors), math.log(lv.load)])
                for n in names:
                    if n in sim and sim[n] > 0:
                        rows_y[n].append((row, math.log(sim[n])))
        x_all = np.array(rows_x)
        models = {}
        for n in names:
            idx = [r for r, _ in rows_y[n]]
            if len(idx) < 8:
                continue
            model = make_pipeline(StandardScaler(), PolynomialFeatures(2), Ridge(alpha=1e-3))
            model.fit(x_all[idx], [v for _, v in rows_y[n]])
            models[n] = model
        targets = [
            (n, math.log(lv.load), math.log(v))
            for lv in levels
            for n, v in lv.metrics.items()
            if n in models
        ]
        if not targets:
            raise RunError("the simulator yields none of the limit.json's latency metrics")

        def loss(logf: np.ndarray) -> float:
            total = 0.0
            for n, model in models.items():
                rows = [t for t in targets if t[0] == n]
                if rows:
                    feats = np.array([[*logf, load] for _, load, _ in rows])
                    pred = model.predict(feats)
                    total += float(np.sum((pred - np.array([t[2] for t in rows])) ** 2))
            return total

        ranked = design[np.argsort([loss(np.log(f)) for f in design])[:3]]
        bounds = list(zip(box_lo, box_hi, strict=True))
        best = min(
            (minimize(loss, np.log(f), method="L-BFGS-B", bounds=bounds) for f in ranked),
            key=lambda r: r.fun,
        )
        return np.exp(best.x)

    sobol = qmc.Sobol(3, seed=rng_seed)
    first = fit(np.exp(lo + sobol.random(design_points) * (hi - lo)), lo, hi)
    # Second round: the same fit in a box around the first answer, where quadratic is enough.
    lo2 = np.maximum(lo, np.log(first) - 0.4)
    hi2 = np.minimum(hi, np.log(first) + 0.4)
    factors = fit(np.exp(lo2 + sobol.random(design_points) * (hi2 - lo2)), lo2, hi2)
    fitted = with_factors(factors)
    errors = _errors(levels, simulate_levels(fitted))
    default_errors = _errors(levels, simulate_levels(config))
    fitted = fitted.model_copy(
        update={"calibration_source": f"fitted to {len(levels)} measured levels of the limit"}
    )
    return fitted, Calibration(
        limit_reproduced=_reproduces_limit(profile, fitted, result, duration_s, rng_seed),
        mfu=fitted.mfu,
        mbu=fitted.mbu,
        step_overhead_s=fitted.step_overhead_s,
        mean_rel_error=float(np.mean(errors)),
        max_rel_error=float(np.max(errors)),
        levels=len(levels),
        metrics=tuple(names),
        default_mean_rel_error=float(np.mean(default_errors)),
    )


def _level_span_s(level: MeasuredLevel, default_s: float) -> float:
    """Seconds to simulate a level for: its measured length (warm-up included), else default."""
    if level.judged_s is not None and level.judged_s >= 5.0:
        return level.judged_s / (1 - _CAL_WARMUP)
    return default_s


def _reproduces_limit(
    profile: Profile, config: EngineConfig, result: LimitResult, duration_s: float, rng_seed: int
) -> bool | None:
    """Does one simulated instance pass the SLO at feasible_max and fail at infeasible_min?

    Each bound is simulated as it was measured (length and runs pooled, when the level tells).
    None when the limit's SLO is not one the simulator can judge or a bound is missing.
    """
    try:
        slo = parse_slo(result.slo)
    except ConfigError:
        return None
    if simulator_slo_problem(slo) is not None:
        return None
    if result.feasible_max is None or result.infeasible_min is None:
        return None

    by_load = {lv.load: lv for lv in measured_levels(result)}

    def meets(load: float) -> bool:
        level = by_load.get(load)
        span = _level_span_s(level, duration_s) if level is not None else duration_s
        runs = min(level.runs, 3) if level is not None else 1
        pooled = []
        for r in range(runs):
            if result.dimension == "rate":
                rng = np.random.default_rng(rng_seed + r)
                reqs = profile_requests(
                    profile,
                    load,
                    span,
                    rng,
                    config.effective_max_model_len,
                    block_tokens=config.block_tokens,
                )
                run = simulate_fleet(reqs, config, 1)
            else:
                run = closed_loop_run(profile, config, max(1, round(load)), span, rng_seed + r)
            pooled.append(run)
        return judge(_pool(pooled), slo, _CAL_WARMUP * span).meets_slo

    return meets(result.feasible_max) and not meets(result.infeasible_min)


def _pool(runs: Sequence[FleetRun]) -> FleetRun:
    """Runs of the same span as one run (the limit search pools repeated measurements)."""
    first = runs[0]
    if len(runs) == 1:
        return first
    return FleetRun(
        instances=first.instances,
        routing=first.routing,
        arrival_s=np.concatenate([r.arrival_s for r in runs]),
        ttft_s=np.concatenate([r.ttft_s for r in runs]),
        tpot_s=np.concatenate([r.tpot_s for r in runs]),
        e2e_s=np.concatenate([r.e2e_s for r in runs]),
        output_tokens=np.concatenate([r.output_tokens for r in runs]),
        instance=np.concatenate([r.instance for r in runs]),
        simulated_s=max(r.simulated_s for r in runs),
        wall_s=sum(r.wall_s for r in runs),
        steps=sum(r.steps for r in runs),
    )
