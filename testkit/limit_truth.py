"""`capplan limit` against the slot server, checked against the queueing truth.

A case is a slot server (slots, prefill, per-token time, the server's own choice of answer
lengths, optionally refusals) and a TTFT percentile SLO. `run_case` starts the server, runs
the real `capplan limit` CLI against it in a subprocess (default settings but the first
level), then computes the truth from the service times the server logged during that same
run: the M/G/c simulation (queueing server) or Erlang-B (refusing server). Used by
tests/integration/test_limit_truth.py and bench/limit_truth.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from testkit.queue_truth import loaded_max_rate, loss_max_rate, mgc_max_rate
from testkit.slot_server import SlotServer, SlotTiming, start_slot_server

CAPPLAN = Path(sys.executable).with_name("capplan")


@dataclass(frozen=True)
class TruthCase:
    """A slot server and a `ttft:p{quantile}<=threshold` SLO."""

    name: str
    slots: int
    prefill_s: float
    per_token_s: float
    tokens: str  # the server's answer lengths: N or LO:HI (uniform)
    ttft_threshold_s: float
    quantile: float = 0.95
    refuse_above: int = 0  # 0: queue beyond the slots; N: refuse when N are active
    slowdown: float = 0.0  # tokens this much slower with every slot held (--slowdown)

    @property
    def slo(self) -> str:
        return f"ttft:p{self.quantile * 100:g}<={self.ttft_threshold_s:g}s"

    @property
    def mean_tokens(self) -> float:
        low, _, high = self.tokens.partition(":")
        return (int(low) + int(high or low)) / 2

    @property
    def capacity_rps(self) -> float:
        """Slots over the nominal mean service time: the most the server can complete."""
        servers = self.refuse_above or self.slots
        return servers / (self.prefill_s + self.mean_tokens * self.per_token_s)

    @property
    def start_rps(self) -> float:
        """The first level: half the capacity (saves the doubling levels from 1 req/s)."""
        return round(0.5 * self.capacity_rps, 2)

    def start_server(self, seed: int = 0) -> SlotServer:
        """A fresh slot server with this case's timing (its answer lengths drawn from `seed`)."""
        return start_slot_server(
            self.slots,
            self.prefill_s,
            self.per_token_s,
            tokens=self.tokens,
            refuse_above=self.refuse_above,
            slowdown=self.slowdown,
            seed=seed,
        )


# About 0.7 s per request: 8 slots, 50 ms to the first token, 10 ms per token, 32..96 tokens.
SHORT = TruthCase("short", slots=8, prefill_s=0.05, per_token_s=0.01, tokens="32:96",
                  ttft_threshold_s=0.5)  # fmt: skip
# About 10 s per request: 32 slots, 0.2 s to the first token, 50 ms per token, 160..232.
LONG = TruthCase("long", slots=32, prefill_s=0.2, per_token_s=0.05, tokens="160:232",
                 ttft_threshold_s=2.0)  # fmt: skip
# Refuses (HTTP 429) when 6 are active; 0.76 s per admitted request.
REFUSING = TruthCase("refusing", slots=6, prefill_s=0.06, per_token_s=0.01, tokens="70",
                     ttft_threshold_s=1.0, refuse_above=6)  # fmt: skip
CASES = {case.name: case for case in (SHORT, LONG, REFUSING)}


@dataclass(frozen=True)
class TruthResult:
    case: TruthCase
    truth_rps: float
    measured_rps: float | None  # limit.json's feasible_max
    wall_s: float  # of the capplan limit run
    finished: int  # requests the server finished (the service-time sample)
    refused: int
    mean_service_s: float
    output: str  # what capplan limit printed

    @property
    def ratio(self) -> float | None:
        return None if self.measured_rps is None else self.measured_rps / self.truth_rps

    def line(self) -> str:
        measured = "none" if self.measured_rps is None else f"{self.measured_rps:.3g} req/s"
        ratio = "n/a" if self.ratio is None else f"{self.ratio:.3f}"
        return (
            f"{self.case.name}: {self.case.slo}  truth {self.truth_rps:.3g} req/s  "
            f"measured {measured}  ratio {ratio}  wall {self.wall_s:.0f} s  "
            f"({self.finished} requests finished, mean service {self.mean_service_s:.3f} s, "
            f"{self.refused} refused)"
        )


def truth_rps(case: TruthCase, timings: list[SlotTiming], *, seed: int = 0) -> float:
    """The steady-state limit of `case` for the service times in `timings` (finished
    requests only). Raises ValueError with too few finished requests, or when admitted
    requests of a refusing server are not fast enough for the SLO to be about refusals."""
    done = [t for t in timings if t.service_s is not None and t.first_token_s is not None]
    if len(done) < 50:
        raise ValueError(f"only {len(done)} finished requests logged: too few for the truth")
    service = np.array([t.service_s for t in done], dtype=float)
    first = np.array([t.first_token_s for t in done], dtype=float)
    if case.refuse_above:
        # Admitted requests never wait; with refusals as +inf the percentile holds while the
        # refused share stays within 1 - q, provided admitted ones meet the threshold.
        if float(np.quantile(first, 0.999)) > case.ttft_threshold_s:
            raise ValueError("admitted requests miss the TTFT threshold on their own")
        return loss_max_rate(case.refuse_above, float(service.mean()), case.quantile)
    if case.slowdown:
        # each request's nominal time after its first token: what it took over its slowdown
        factor = np.array([t.slowdown for t in done], dtype=float)
        token = (service - first) / factor
        return loaded_max_rate(
            first, token, case.slots, case.slowdown, case.ttft_threshold_s, case.quantile,
            seed=seed,
        )  # fmt: skip
    return mgc_max_rate(service, first, case.slots, case.ttft_threshold_s, case.quantile, seed=seed)


def run_case(
    case: TruthCase, out_dir: Path, *, extra_args: tuple[str, ...] = (), timeout_s: float = 3600
) -> TruthResult:
    """Start the case's server, run `capplan limit` on it, compute the truth from what the
    server logged (also written to `out_dir/server_timings.json`). Raises RuntimeError
    (with its output) when the CLI fails, subprocess.TimeoutExpired when it overruns."""
    server = case.start_server()
    try:
        cmd = [
            str(CAPPLAN),
            "limit",
            "--host", server.url,
            "--model", "x",
            "--no-preflight",  # the truth is read from the server's log: nothing else in it
            "--slo", case.slo,
            "--dimension", "rate",
            "--start", f"{case.start_rps:g}",
            "-o", str(out_dir),
            *extra_args,
        ]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        wall_s = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(
                f"capplan limit exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
            )
        timings = server.timings()
    finally:
        server.stop()
    # The server's own log, kept next to capplan's records for a look at what it saw.
    rows = [asdict(t) for t in timings]
    (out_dir / "server_timings.json").write_text(json.dumps(rows) + "\n")
    limit = json.loads((out_dir / "limit.json").read_text())
    done = [t.service_s for t in timings if t.service_s is not None]
    return TruthResult(
        case=case,
        truth_rps=truth_rps(case, timings),
        measured_rps=limit.get("feasible_max"),
        wall_s=wall_s,
        finished=len(done),
        refused=sum(t.refused for t in timings),
        mean_service_s=float(np.mean(done)) if done else float("nan"),
        output=proc.stdout,
    )
