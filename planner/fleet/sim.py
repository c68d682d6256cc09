"""The fleet simulator: engine requests replayed in virtual time against n engine instances.

One event loop runs over the arrivals and every instance's next step end (a heap; for an
instance in a decode run, `planner.engine.engine`, the run's last step end, cut back to the
step in flight when a request is routed to it); a request goes to an instance chosen by the
router (`planner.fleet.routing`: `round_robin`, `least_outstanding`, `power_of_two`,
`session_affinity`, `prefix_aware`) and joins that instance's next step. The engines are
`planner.engine.Engine`, the same model the emulator runs in real time; the prefix-hit ratio
a run reports is their own prefix caches' count (hit prompt tokens over queried ones), never
the router's estimate.
`closed_loop_run` holds a number of users in flight on one instance instead. The requests come
from `planner.fleet.traffic`.

Verdicts (`judge`) are `planner.slo.verdict.evaluate` over the requests arriving after a warm-up (an
empty fleet is optimistic): the same verdict the limit search gives a measured stage.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from contracts.finding import Finding
from contracts.limit import Dimension
from planner.engine import Engine, EngineConfig, EngineRequest, StepResult, kv_capacity_blocks
from planner.fleet.rest import ELSEWHERE, RestOfFleet
from planner.fleet.routing import Routing, RoutingSettings, make_router
from planner.fleet.traffic import ArrivalKind, check_sampler, profile_requests, shape_request
from planner.slo.spec import Slo
from planner.slo.verdict import evaluate
from profiles.model import Profile
from profiles.workload import WorkloadStream

# The routers the plan's fleet check compares unless asked for others (--routing).
ROUTINGS: tuple[Routing, ...] = ("round_robin", "least_outstanding")
SIMULATED_METRICS = ("ttft", "tpot", "e2e")


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
    prefix_queried_tokens: int = 0  # prompt tokens the engines' prefix caches looked up
    prefix_hit_tokens: int = 0  # of those, the tokens they found cached

    @property
    def prefix_hit_ratio(self) -> float | None:
        """Hit over queried prompt tokens, summed over the instances (None: nothing queried)."""
        if self.prefix_queried_tokens <= 0:
            return None
        return self.prefix_hit_tokens / self.prefix_queried_tokens


def simulate_fleet(
    requests: Sequence[EngineRequest],
    config: EngineConfig,
    instances: int,
    routing: Routing = "least_outstanding",
    settings: RoutingSettings | None = None,
) -> FleetRun:
    """Replay `requests` (any order) against `instances` engines in virtual time.

    Runs until every request has finished. `settings` tune the router (the prefix router's
    index is bounded by the engine's KV blocks unless they say otherwise). Raises
    ConfigError for fewer than one instance or an unknown routing.
    """
    sim = FleetSimulation(requests, config, instances, routing, settings)
    sim.advance()
    return sim.run()


class FleetSimulation:
    """`simulate_fleet`'s event loop, able to pause: `advance(until_s)` handles every arrival
    and step end at or before `until_s` and stops before the first later one, so advancing in
    several calls gives the same run, bit for bit, as advancing once. A request finished by
    then has its final figures (`run(m)`); the engine is causal, so they do not depend on
    the arrivals still to come.

    With `rest` (`planner.fleet.rest`), `requests` are ignored: the instances are a few of a
    least-outstanding fleet, every arrival of the whole fleet is routed by `rest` among them
    and the rest of the fleet, and a run holds the requests routed to them alone.
    """

    def __init__(
        self,
        requests: Sequence[EngineRequest],
        config: EngineConfig,
        instances: int,
        routing: Routing = "least_outstanding",
        settings: RoutingSettings | None = None,
        rest: RestOfFleet | None = None,
    ) -> None:
        if instances < 1:
            raise ConfigError(f"the fleet needs at least one instance, got {instances}")
        self.wall0 = time.perf_counter()
        settings = settings or RoutingSettings()
        if settings.index_blocks is None:
            settings = replace(settings, index_blocks=max(1, kv_capacity_blocks(config)))
        self.instances = instances
        self.routing: Routing = routing
        self.router = make_router(routing, instances, settings)
        fast = config.model_copy(update={"record_token_times": False})
        self.engines = [Engine(fast, token_events=False) for _ in range(instances)]
        self.rest = rest
        if rest is None:
            order = sorted(range(len(requests)), key=lambda k: requests[k].arrival_s)
            given = [requests[k] for k in order]
            self.reqs: list[EngineRequest | None] = list(given)
            self.index = {r.request_id: k for k, r in enumerate(given)}
            self.arrival = np.array([r.arrival_s for r in given], dtype=float)
        else:  # every arrival of the whole fleet; a request made when it is routed here
            self.reqs = [None] * len(rest.arrival_s)
            self.index = {}
            self.arrival = rest.arrival_s
        n = self.n = len(self.reqs)
        self.ttft = np.full(n, np.nan)
        self.tpot = np.full(n, np.nan)
        self.e2e = np.full(n, np.nan)
        self.out_tokens = np.zeros(n, dtype=np.int64)
        self.where = np.full(n, -1, dtype=np.int64)
        self.outstanding = [0] * instances
        self.pending: list[tuple[float, int, int]] = []  # (step end, instance, entry) mid-step
        self.results: list[object] = [None] * instances
        self.steps = 0
        self.last_end = 0.0
        self.k = 0  # the next arrival
        # An engine in a decode run (planner.engine.engine) takes the whole run at once: its
        # steps have no events, so only a request routed to it during them matters, and then
        # the steps after the one in flight are given back (`DecodeRuns.cut`). `due` holds
        # each instance's one live entry in `pending` (older ones are skipped).
        self.runs: list[list[float]] = [[] for _ in range(instances)]
        self.due = [-1] * instances

    def advance(self, until_s: float = math.inf) -> None:
        """Handle every arrival and step end at or before `until_s` (by default: all)."""
        engines, runs, results, due = self.engines, self.runs, self.results, self.due
        pending, reqs, arrival = self.pending, self.reqs, self.arrival
        outstanding = self.outstanding
        index, ttft, tpot, e2e = self.index, self.ttft, self.tpot, self.e2e
        out_tokens, where, n = self.out_tokens, self.where, self.n
        steps, k, last_end = self.steps, self.k, self.last_end
        run_result = StepResult(start_s=0.0, duration_s=0.0, end_s=0.0, events=())

        def start_step(i: int, now: float) -> None:
            nonlocal steps
            engine = engines[i]
            if engine.runs.left:
                ends = runs[i] = engine.runs.take(now)
                steps += len(ends)
                results[i] = run_result
                due[i] += 1
                heapq.heappush(pending, (ends[-1], i, due[i]))
                return
            runs[i] = []
            res = engine.step(now)
            if res.duration_s > 0:  # a step, or a wait for the engine's front end
                steps += res.batch_size > 0
                results[i] = res
                due[i] += 1
                heapq.heappush(pending, (res.end_s, i, due[i]))
            else:
                results[i] = None  # nothing schedulable: idle until the next arrival

        route = self.router.route
        rest = self.rest
        rest_next = rest.next_taken if rest is not None else None
        make_request = rest.make_request if rest is not None else None
        while k < n or pending:
            if k < n and (not pending or arrival[k] <= pending[0][0]):
                if arrival[k] > until_s:
                    break
                req = reqs[k]
                if req is None:  # a share of a larger fleet (`RestOfFleet`)
                    limit_s = min(until_s, pending[0][0]) if pending else until_s
                    k, i = rest_next(k, limit_s, outstanding)  # type: ignore[misc]
                    if i == ELSEWHERE:
                        continue  # the rest took every arrival up to the next event
                    now = float(arrival[k])
                    req = reqs[k] = make_request(k, now)  # type: ignore[misc]
                    index[req.request_id] = k
                else:
                    now = req.arrival_s
                    i = route(req, outstanding)
                engine = engines[i]
                ends = runs[i]
                if ends:
                    # The step in flight is the first ending at or after the arrival.
                    kept = bisect.bisect_left(ends, now) + 1
                    if kept < len(ends):
                        engine.runs.cut(kept)
                        steps -= len(ends) - kept
                        due[i] += 1
                        heapq.heappush(pending, (ends[kept - 1], i, due[i]))
                    runs[i] = []
                engine.add_request(req, now)
                outstanding[i] += 1
                where[k] = i
                k += 1
                if results[i] is None:
                    start_step(i, now)
                continue
            if pending[0][0] > until_s:
                break
            end, i, version = heapq.heappop(pending)
            if version != due[i]:
                continue  # a decode run cut short: its step in flight has its own entry
            last_end = end
            runs[i] = []
            res = results[i]
            engine = engines[i]
            for ev in res.events:  # type: ignore[attr-defined]
                if ev.kind == "finished":
                    tl = engine.timeline(ev.request_id)
                    j = index[ev.request_id]
                    ttft[j] = tl.ttft_s
                    e2e[j] = tl.e2e_s
                    if tl.output_tokens > 1:
                        tpot[j] = tl.tpot_s
                    out_tokens[j] = tl.output_tokens
                    outstanding[i] -= 1
                    engine.forget(ev.request_id)
            if engine.has_work():
                start_step(i, end)
            else:
                results[i] = None
        self.steps, self.k, self.last_end = steps, k, last_end

    def fork(self, arrivals: int) -> FleetSimulation:
        """A copy of the run so far that will take only the first `arrivals` requests (at
        least those taken already): advanced to its end, it is the run over those alone."""
        if arrivals < self.k:
            raise ValueError(f"the run has taken {self.k} arrivals already, not {arrivals}")
        # Never changed after the start: shared, not copied (the requests are frozen).
        memo: dict[int, object] = {id(x): x for x in (self.reqs, self.index, self.arrival)}
        memo.update((id(r), r) for r in self.reqs)
        copy = deepcopy(self, memo)
        copy.n = arrivals
        return copy

    def run(self, m: int | None = None) -> FleetRun:
        """The run so far, of the first `m` requests in arrival order (default: all); NaN
        for a request not finished yet."""
        cut: slice | np.ndarray = slice(None) if m is None else slice(0, m)
        if self.rest is not None:  # the arrivals routed here, not those the rest took
            cut = np.flatnonzero(self.where[cut] != ELSEWHERE)
        gauges = [e.gauges() for e in self.engines]
        return FleetRun(
            instances=self.instances,
            routing=self.routing,
            arrival_s=self.arrival[cut],
            ttft_s=self.ttft[cut],
            tpot_s=self.tpot[cut],
            e2e_s=self.e2e[cut],
            output_tokens=self.out_tokens[cut],
            instance=self.where[cut],
            simulated_s=self.last_end,
            wall_s=time.perf_counter() - self.wall0,
            steps=self.steps,
            prefix_queried_tokens=sum(g.prefix_cache_queries_tokens for g in gauges),
            prefix_hit_tokens=sum(g.prefix_cache_hits_tokens for g in gauges),
        )


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
    check_sampler(profile)
    stream = WorkloadStream(profile, seed=rng_seed)
    engine = Engine(config.model_copy(update={"record_token_times": False}), token_events=False)
    rows: list[tuple[float, float, float, float, int]] = []
    count = 0

    def add(now: float) -> None:
        nonlocal count
        request = shape_request(
            next(stream), str(count), now, config.effective_max_model_len, config.block_tokens
        )
        engine.add_request(request, now)
        count += 1

    for _ in range(users):
        add(0.0)
    now, steps = 0.0, 0
    while now < duration_s:
        res = engine.step(now)
        if res.duration_s <= 0:
            break  # nothing schedulable: cannot happen with requests that fit
        steps += res.batch_size > 0  # not the waits for the engine's front end
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
    gauges = engine.gauges()
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
        prefix_queried_tokens=gauges.prefix_cache_queries_tokens,
        prefix_hit_tokens=gauges.prefix_cache_hits_tokens,
    )


def open_loop_run(
    profile: Profile,
    config: EngineConfig,
    rate_rps: float,
    duration_s: float,
    rng_seed: int = 0,
    arrival_kind: ArrivalKind = "gamma",
) -> FleetRun:
    """One instance fed the profile's traffic at `rate_rps` for `duration_s` (an open loop).

    The requests are one seeded draw of `planner.fleet.traffic.profile_requests`; every one is
    simulated to its end. Raises ConfigError as profile_requests does.
    """
    requests = profile_requests(
        profile,
        rate_rps,
        duration_s,
        np.random.default_rng(rng_seed),
        config.effective_max_model_len,
        arrival_kind,
        block_tokens=config.block_tokens,
    )
    return simulate_fleet(requests, config, 1)


def level_run(
    profile: Profile,
    config: EngineConfig,
    load: float,
    dimension: Dimension,
    duration_s: float,
    rng_seed: int = 0,
) -> FleetRun:
    """One instance at a limit level's load: `load` req/s open loop, or `load` users closed."""
    if dimension == "rate":
        return open_loop_run(profile, config, load, duration_s, rng_seed)
    return closed_loop_run(profile, config, max(1, round(load)), duration_s, rng_seed)


def pool_runs(runs: Sequence[FleetRun]) -> FleetRun:
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
        prefix_queried_tokens=sum(r.prefix_queried_tokens for r in runs),
        prefix_hit_tokens=sum(r.prefix_hit_tokens for r in runs),
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


def simulator_slo_problem(slo: Slo) -> Finding | None:
    """Why the simulator cannot judge `slo` (it yields ttft, tpot and e2e), or None."""
    metrics = {c.metric for c in slo.percentiles} | {t.metric for t in slo.request_thresholds}
    missing = sorted(metrics - set(SIMULATED_METRICS))
    if missing:
        return Finding(
            key="fleet.slo_metrics",
            values={"missing": ", ".join(missing), "simulated": ", ".join(SIMULATED_METRICS)},
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
    """`planner.slo.verdict.evaluate` over the requests arriving after `warmup_s`.

    The same verdict the limit search gives a measured stage: percentiles over the finished
    requests (linear interpolation), attainment over all, a request that never finished is
    an error. Raises ConfigError for an SLO the simulator cannot judge (see
    `simulator_slo_problem`).
    """
    problem = simulator_slo_problem(slo)
    if problem is not None:
        raise ConfigError(problem.english())
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
