"""Between two levels: wait until the server has worked off what the last one left it.

A level that ends overloaded leaves requests queued at the server, and the load test cancels
them by closing their connections. Not every server lets go at once: llama.cpp learns that a
request was cancelled only when a slot starts it, so after a level that queued thousands of
requests it spent minutes on them before it served the next level's (capplan's fast search
on llama.cpp, 2026-12-03: none of 1694 requests of the next level ended in 105 s). A level
that starts on such a server measures the backlog, not its load.

So before a level that follows one which cancelled requests, `settle` sends one short
request at a time (streamed, a single token, not in the run's records) and waits for its
first token, then hangs up (a server that streams on past the one token asked for costs no
more). A queue served in arrival order answers the first such probe only after the
backlog, and the next one about as soon as an idle server answers. The server is settled
once a probe's first token came no later than `SAME` x the one before's (or `SAME_S` more):
a probe that met no more backlog than the one before. The wait is capped (`CAP_S`); past
it the next level starts anyway and the progress line says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import PreflightError
from contracts.rundir import read_stages
from planner.loadtest.preflight import check_base_url, first_token_s
from planner.loadtest.run import LoadTestConfig

CAP_S = 600.0  # the longest wait for a settled server
SAME = 1.5  # a probe as fast as the one before: its first token within 1.5 x ...
SAME_S = 0.05  # ... or 50 ms of it
PAUSE_S = 0.2  # between a failed probe and the next

FirstToken = Callable[[float], float]  # one probe within a timeout: its TTFT, or raises


@dataclass(frozen=True)
class Settled:
    """How a wait for a settled server went: its seconds, each probe's first-token time
    (None: the probe failed) and whether the server settled before the cap."""

    waited_s: float
    probes: tuple[float | None, ...]
    settled: bool

    def line(self, level: str) -> str:
        if not self.settled:
            return (
                f"{level}: the server was still busy {self.waited_s:.0f} s after the last "
                f"level cancelled its requests (the cap); starting anyway"
            )
        return (
            f"{level}: waited {self.waited_s:.1f} s for the server to work off what the last "
            f"level cancelled ({len(self.probes)} one-token requests, the last one's first "
            f"token after {1e3 * (self.probes[-1] or 0.0):.0f} ms)"
        )


def settle(
    probe: FirstToken,
    *,
    cap_s: float = CAP_S,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> Settled:
    """Probe until a probe comes back no slower than the one before (see the module), at
    most `cap_s`."""
    start = clock()
    probes: list[float | None] = []
    while True:
        left = cap_s - (clock() - start)
        if left <= 0:
            return Settled(clock() - start, tuple(probes), settled=False)
        try:
            ttft: float | None = probe(left)
        except PreflightError:
            ttft = None
            pause(PAUSE_S)
        before = probes[-1] if probes else None
        probes.append(ttft)
        if ttft is not None and before is not None and ttft <= max(SAME * before, before + SAME_S):
            return Settled(clock() - start, tuple(probes), settled=True)


def cancelled_last(out_dir: Path) -> bool:
    """Whether the run directory's last stage cancelled requests it had sent."""
    stages = read_stages(out_dir)
    return bool(stages) and stages[-1].errors_by_class.get("cancelled", 0) > 0


def target_probe(config: LoadTestConfig) -> FirstToken:
    """One-token probes of the load test's target (its model, endpoint and API key)."""
    base = check_base_url(config.host)
    key = os.environ.get(config.api_key_env) if config.api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return lambda timeout_s: first_token_s(
        base, config.model, config.endpoint, headers, timeout_s, max_tokens=1, first_only=True
    )
