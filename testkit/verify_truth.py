"""`capplan verify` over slot servers behind nginx, checked against the queueing truth.

A case is n slot servers (c FIFO slots, service prefill + n_tokens x per-token, the server's
own answer lengths) and a TTFT percentile SLO. The truth is testkit.queue_truth's, code
apart from capplan's:

- the per-instance limit the plan is made with: the highest Poisson rate whose M/G/c FCFS
  TTFT quantile holds the SLO, for the server's nominal service times (`limit_rps`);
- the steady-state prediction for the fleet at a count: Poisson arrivals at the plan's rate
  split round-robin (nginx's default) over that many FCFS c-slot servers, with the service
  times the servers logged (`fleet_ttft_quantile`);
- what happened: per server, the FCFS waits of its logged arrivals and service times plus
  each request's logged first-token offset, for the requests that arrived in the verify
  run's judged steady window (`logged_ttfts`).

`run_case` makes the plan with `capplan plan --limit <truth>rps` (a limit measured elsewhere),
runs `capplan verify` at N and with one instance out of nginx's pool, and returns the
figures. Used by tests/integration/test_verify_slots.py and bench/verify_truth.py.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from capplan.cli import app
from contracts.rundir import read_run_info, read_stages
from contracts.verify import Verify
from planner.verify.nginx import nginx_balancer
from profiles.model import save_profile
from testkit.profiles import make_profile
from testkit.queue_truth import fcfs_waits, mgc_max_rate, ttft_quantile
from testkit.slot_server import SlotServer, SlotTiming, start_slot_server


@dataclass(frozen=True)
class SlotFleetCase:
    """Slot servers of one kind, a `ttft:p{quantile}<=threshold` SLO and the plan's peak as
    a multiple of the truth's per-instance limit."""

    slots: int = 4
    prefill_s: float = 0.05
    per_token_s: float = 0.05
    tokens_low: int = 8
    tokens_high: int = 16
    ttft_threshold_s: float = 0.5
    quantile: float = 0.95
    peak_over_limit: float = 2.9  # 3 instances at 97 % of the limit each; 2 at 145 %

    @property
    def slo(self) -> str:
        return f"ttft:p{self.quantile * 100:g}<={self.ttft_threshold_s:g}s"

    @property
    def tokens(self) -> str:
        return f"{self.tokens_low}:{self.tokens_high}"

    def nominal_service_s(self) -> tuple[np.ndarray, np.ndarray]:
        """Service and first-token times of each answer length, equally likely (the spec)."""
        n_tokens = np.arange(self.tokens_low, self.tokens_high + 1, dtype=float)
        service_s = self.prefill_s + n_tokens * self.per_token_s
        return service_s, np.full_like(service_s, self.prefill_s)

    def limit_rps(self) -> float:
        """The truth's per-instance limit: M/G/c FCFS under Poisson arrivals."""
        service_s, first_s = self.nominal_service_s()
        return mgc_max_rate(service_s, first_s, self.slots, self.ttft_threshold_s, self.quantile)


def fleet_ttft_quantile(
    rate_rps: float,
    instances: int,
    service_s: np.ndarray,
    first_token_s: np.ndarray,
    slots: int,
    q: float,
    *,
    arrivals: int = 120_000,
    seed: int = 0,
) -> float:
    """Steady-state TTFT `q` quantile of Poisson arrivals at `rate_rps` dealt round-robin to
    `instances` FCFS servers of `slots` slots; each request draws a (service, first token)
    pair of the sample. The first tenth of the arrivals is left out as warm-up."""
    rng = np.random.default_rng(seed)
    arrival_s = np.cumsum(rng.exponential(1.0 / rate_rps, arrivals))
    picks = rng.integers(0, service_s.size, arrivals)
    ttfts = []
    for k in range(instances):
        mine = slice(k, None, instances)
        waits = fcfs_waits(arrival_s[mine], service_s[picks[mine]], slots)
        ttfts.append((waits + first_token_s[picks[mine]])[len(waits) // 10 :])
    return float(np.quantile(np.concatenate(ttfts), q))


def finished(timings: list[SlotTiming]) -> list[SlotTiming]:
    return [t for t in timings if t.service_s is not None and t.first_token_s is not None]


def logged_ttfts(
    timings: list[SlotTiming], slots: int, window_perf_s: tuple[float, float]
) -> np.ndarray:
    """The FCFS truth of one server's log: each finished request's wait for one of `slots`
    slots given the logged arrivals and service times, plus its logged first-token offset,
    for arrivals inside `window_perf_s` (the server's perf_counter clock)."""
    done = sorted(finished(timings), key=lambda t: t.arrival_s)
    arrival_s = np.array([t.arrival_s for t in done])
    service_s = np.array([t.service_s for t in done], dtype=float)
    first_s = np.array([t.first_token_s for t in done], dtype=float)
    waits = fcfs_waits(arrival_s, service_s, slots)
    inside = (arrival_s >= window_perf_s[0]) & (arrival_s < window_perf_s[1])
    return (waits + first_s)[inside]


def logged_waits_match(timings: list[SlotTiming], slots: int) -> float:
    """The largest gap between the FCFS wait computed from the log and the wait the server
    logged (slot start - arrival): how FIFO the server's own slots were, in seconds."""
    done = sorted(finished(timings), key=lambda t: t.arrival_s)
    arrival_s = np.array([t.arrival_s for t in done])
    service_s = np.array([t.service_s for t in done], dtype=float)
    logged = np.array([t.slot_start_s for t in done], dtype=float) - arrival_s
    return float(np.max(np.abs(fcfs_waits(arrival_s, service_s, slots) - logged)))


@dataclass(frozen=True)
class Measured:
    """One verify run and what its serving slot servers logged."""

    exit_code: int
    output: str
    verify: Verify
    ttft_p95_s: float | None  # capplan's measured steady phase
    logs: list[list[SlotTiming]]  # per serving server, GET /timings after the run
    window_perf_s: tuple[float, float]  # the judged steady window on the servers' clock
    wall_s: float

    def logged_ttfts(self, slots: int) -> np.ndarray:
        """The FCFS truth of the logs inside the steady window, pooled over the servers."""
        return np.concatenate([logged_ttfts(log, slots, self.window_perf_s) for log in self.logs])

    def truth_p95_s(self, slots: int) -> float:
        return float(np.quantile(self.logged_ttfts(slots), 0.95))

    def fifo_gap_s(self, slots: int) -> float:
        return max(logged_waits_match(log, slots) for log in self.logs)


@dataclass(frozen=True)
class CaseResult:
    case: SlotFleetCase
    limit_rps: float
    peak_rps: float
    instances: int
    plan_output: str
    mean_service_s: float
    predicted_p95_at_n_s: float  # round-robin fleet truth at the plan's peak
    predicted_p95_below_s: float
    per_instance_p95_at_n_s: float  # M/G/c Poisson truth at peak / n (the limit's terms)
    per_instance_p95_below_s: float
    at_n: Measured
    below: Measured

    def lines(self) -> list[str]:
        c = self.case
        n = self.instances
        head = (
            f"{n} x slot server ({c.slots} slots, service {c.prefill_s:g} + "
            f"{c.tokens} x {c.per_token_s:g} s, logged mean {self.mean_service_s:.3f} s), "
            f"{c.slo}; truth's limit {self.limit_rps:.3f} req/s per instance, "
            f"peak {self.peak_rps:.2f} req/s -> plan n={n}"
        )
        rows = [head]
        for label, m, predicted, alone in (
            (f"n={n}", self.at_n, self.predicted_p95_at_n_s, self.per_instance_p95_at_n_s),
            (f"n={n - 1}", self.below, self.predicted_p95_below_s, self.per_instance_p95_below_s),
        ):
            truth = m.truth_p95_s(c.slots)
            rows.append(
                f"{label}: exit {m.exit_code}, measured TTFT p95 {_s(m.ttft_p95_s)}, "
                f"FCFS truth of the servers' logs {truth:.3f} s "
                f"({m.logged_ttfts(c.slots).size} requests, {_ratio(m.ttft_p95_s, truth)}), "
                f"steady-state truth round-robin {predicted:.3f} s, Poisson per instance "
                f"{alone:.3f} s -> {'holds' if predicted <= c.ttft_threshold_s else 'fails'}; "
                f"log vs FIFO {m.fifo_gap_s(c.slots) * 1000:.1f} ms at most; "
                f"verify {m.wall_s:.0f} s"
            )
        return rows


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s"


def _ratio(measured: float | None, truth: float | None) -> str:
    if measured is None or truth is None or not np.isfinite(measured):
        return "n/a"
    return f"{measured / truth - 1:+.1%}"


def make_plan(case: SlotFleetCase, folder: Path) -> tuple[Path, Path, float, float, str]:
    """profile.json and plan.json from `capplan plan --limit <truth>rps`; returns their paths,
    the limit, the peak and what the command printed. Raises RuntimeError when it fails."""
    rng = np.random.default_rng(0)
    pairs = [(int(rng.integers(100, 300)), case.tokens_high) for _ in range(100)]
    profile_path = folder / "profile.json"
    save_profile(make_profile(pairs, rate_rps=5.0, peak_to_mean_10s=1.5), profile_path)
    limit = round(case.limit_rps(), 3)
    peak = round(case.peak_over_limit * limit, 2)
    plan_path = folder / "plan.json"
    result = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile_path), "--limit", f"{limit}rps", "--slo", case.slo,
         "--peak-rps", str(peak), "--headroom", "0", "--redundancy", "0", "--no-fleet-check",
         "-o", str(plan_path)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    if result.exit_code != 0:
        raise RuntimeError(f"capplan plan exited {result.exit_code}:\n{result.output}")
    return profile_path, plan_path, limit, peak, result.output


@contextlib.contextmanager
def slot_fleet(case: SlotFleetCase, count: int) -> Iterator[list[SlotServer]]:
    servers: list[SlotServer] = []
    try:
        for k in range(count):
            servers.append(
                start_slot_server(
                    case.slots, case.prefill_s, case.per_token_s, tokens=case.tokens, seed=k
                )
            )
        yield servers
    finally:
        for server in servers:
            server.stop()


def run_verify(
    case: SlotFleetCase,
    plan_path: Path,
    profile_path: Path,
    servers: list[SlotServer],
    down: int,
    out: Path,
    stage_s: tuple[float, float, float],
) -> Measured:
    """`capplan verify` through nginx over all but the last `down` servers, then the truth of
    what the servers logged inside the judged steady window."""
    urls = [s.url for s in servers]
    steady_s, burst_s, recovery_s = stage_s
    started = time.perf_counter()
    with nginx_balancer(urls[: len(urls) - down]) as lb:
        result = CliRunner().invoke(
            app,
            ["verify", "--plan", str(plan_path), "--profile", str(profile_path), "--host", lb,
             "--model", "x", "--instances", ",".join(urls), "--instances-down", str(down),
             "--steady-duration", str(steady_s), "--burst-duration", str(burst_s),
             "--recovery-timeout", str(recovery_s), "-o", str(out)],
        )  # fmt: skip
    wall_s = time.perf_counter() - started
    if not (out / "verify.json").exists():
        raise RuntimeError(f"capplan verify exited {result.exit_code}:\n{result.output}")
    verify = Verify.model_validate_json((out / "verify.json").read_text())
    steady = next(p for p in verify.phases if p.role == "steady")
    logs = [s.timings() for s in servers[: len(servers) - down]]
    (out / "server_timings.json").write_text(
        json.dumps([[asdict(t) for t in log] for log in logs]) + "\n"
    )
    return Measured(
        exit_code=result.exit_code,
        output=result.output,
        verify=verify,
        ttft_p95_s=steady.measured.ttft_p95_s,
        logs=logs,
        window_perf_s=steady_window_perf_s(out, steady.warmup_s),
        wall_s=wall_s,
    )


def steady_window_perf_s(out: Path, warmup_s: float) -> tuple[float, float]:
    """The judged steady window (after its warm-up) on the servers' perf_counter clock: the
    run clock is seconds since run.json's start_epoch_s, and perf_counter is the host's
    CLOCK_MONOTONIC, the same in every process here."""
    start_epoch_s = read_run_info(out).start_epoch_s
    assert start_epoch_s is not None
    stage = next(s for s in read_stages(out) if s.role == "steady")
    perf_minus_epoch_s = time.perf_counter() - time.time()
    begin = start_epoch_s + stage.start_s + warmup_s + perf_minus_epoch_s
    return begin, start_epoch_s + stage.end_s + perf_minus_epoch_s


def run_case(
    case: SlotFleetCase, folder: Path, stage_s: tuple[float, float, float] = (30, 5, 20)
) -> CaseResult:
    """Plan from the truth's limit, verify at N and N-1 through nginx, and the truths."""
    profile_path, plan_path, limit, peak, plan_output = make_plan(case, folder)
    instances = int(json.loads(plan_path.read_text())["instances"])
    with slot_fleet(case, instances) as servers:
        at_n = run_verify(case, plan_path, profile_path, servers, 0, folder / "n", stage_s)
        service = np.array([t.service_s for s in servers for t in finished(s.timings())])
        first = np.array([t.first_token_s for s in servers for t in finished(s.timings())])
    with slot_fleet(case, instances) as servers:  # fresh servers: an empty log and queue
        below = run_verify(case, plan_path, profile_path, servers, 1, folder / "n-1", stage_s)
    counts = (instances, instances - 1)
    fleet = [
        fleet_ttft_quantile(peak, k, service, first, case.slots, case.quantile) for k in counts
    ]
    alone = [ttft_quantile(peak / k, service, first, case.slots, case.quantile) for k in counts]
    return CaseResult(
        case=case,
        limit_rps=limit,
        peak_rps=peak,
        instances=instances,
        plan_output=plan_output,
        mean_service_s=float(service.mean()),
        predicted_p95_at_n_s=fleet[0],
        predicted_p95_below_s=fleet[1],
        per_instance_p95_at_n_s=alone[0],
        per_instance_p95_below_s=alone[1],
        at_n=at_n,
        below=below,
    )
