"""A load test's Locust processes: started, watched until they exit, and read for progress.

`run_locust` starts `locust -f locustfiles/llm.py` headless (one process, a master with local
workers, or a master alone for remote workers), turns the run's `.work/live.json` into
progress lines, and on Ctrl-C asks the run to stop gracefully. `RecoveryWatcher` ends a
plan's recovery stage once the burst is recovered from. planner/loadtest/run.py owns the run
itself; this module only drives the processes.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from contracts.errors import RunError
from contracts.recovery import RECOVERY_WINDOW_S, recovery_curve
from contracts.run import StagePlan
from contracts.rundir import (
    END_STAGE_FILE,
    LIVE_FILE,
    LOG_FILE,
    START_FILE,
    STOP_FILE,
    WORK_DIR,
    read_records,
    read_work_json,
)
from locustfiles.summary import RECOVERY_FACTOR, column_values
from planner.loadtest.netutil import free_port


def format_progress(live: dict[str, Any], offered_rps: float | None) -> str:
    """One progress line from live.json's numbers and the offered rate."""
    p95 = live.get("ttft_p95_s")
    return (
        f"{live.get('stage', '')}  t={live.get('elapsed_s', 0.0):6.1f}s  "
        f"offered {offered_rps if offered_rps is not None else 0.0:7.2f} req/s  "
        f"achieved {live.get('achieved_rps', 0.0):7.2f} req/s  "
        f"in flight {live.get('in_flight', 0):4d}  "
        f"p95 TTFT {'   -   ' if p95 is None else f'{p95:7.3f}s'}  "
        f"errors {live.get('errors', 0)}"
    )


def log_tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of Locust's log, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_locust(
    args: list[str],
    workers: int,
    out_dir: Path,
    work: Path,
    plan: StagePlan,
    progress: Callable[[str], None] | None,
    remote: list[str] | None = None,
    wait_s: float = 0.0,
    on_stage: Callable[[int], None] | None = None,
) -> tuple[bool, int]:
    """Run Locust until it exits; returns (interrupted by Ctrl-C, the master's exit code).

    `remote`: the master's options (planner.loadtest.remote.master_args); it runs alone and waits up
    to `wait_s` for workers started on other hosts. `on_stage` is called with a stage's index
    in the plan when the run enters it (see `Progress`)."""
    log_file = open(out_dir / LOG_FILE, "ab")  # noqa: SIM115 - closed in finally
    procs: list[subprocess.Popen[bytes]] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    plan_s = sum(s.duration_s for s in plan.stages)
    interrupted = False

    def spawn(command: list[str]) -> None:
        procs.append(
            subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )

    try:
        if remote is not None:
            spawn(args + ["--headless", *remote])
            if progress is not None:
                progress(f"waiting for {remote[-3]} workers on {remote[2]}:{remote[4]} ...")
        elif workers > 0:
            port = free_port()
            spawn(
                args
                + ["--headless", "--master", "--expect-workers", str(workers)]
                + ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
            )
            for _ in range(workers):
                spawn(args + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)])
        else:
            spawn(args + ["--headless"])
        master_proc = procs[0]
        reporter = Progress(out_dir, progress, on_stage)
        deadline = time.monotonic() + plan_s + 600.0 + (wait_s if remote is not None else 0.0)
        try:
            while True:
                try:
                    master_proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    reporter.update()
                if time.monotonic() > deadline:
                    raise RunError("Locust ran far past the plan's length; stopped")
        except KeyboardInterrupt:
            interrupted = True
            (work / STOP_FILE).touch()
            # A second Ctrl-C or SIGTERM while Locust stops: stop it at once (below).
            with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                master_proc.wait(timeout=20)
        for p in procs[1:]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
    finally:
        # Every process group is killed before any is waited for, so a signal arriving
        # during a wait cannot leave a later group running.
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
        log_file.close()
    return interrupted, 0 if interrupted else int(procs[0].returncode or 0)


class RecoveryWatcher:
    """Ends a plan's last stage, a recovery, once the burst is recovered from
    (contracts.recovery on the records so far), then passes the line on to `then`.

    The rows of requests still streaming are written when they end, so the live curve is
    trusted only a window plus twice the p95 E2E of the recovery's finished requests after
    the point it shows recovery; the stage summary recomputes it on the complete records.
    """

    EVERY_S = 1.0

    def __init__(self, out_dir: Path, plan: StagePlan, threshold_s: float | None) -> None:
        self.out_dir = out_dir
        self.plan = plan
        self.threshold_s = threshold_s
        self.then: Callable[[str], None] | None = None
        self._last = -math.inf
        self._ended = False

    @classmethod
    def for_plan(
        cls, plan: StagePlan, out_dir: Path, threshold_s: float | None
    ) -> RecoveryWatcher | None:
        roles = [s.role for s in plan.stages]
        if len(roles) < 2 or roles[-1] != "recovery" or "burst" not in roles:
            return None
        return cls(out_dir, plan, threshold_s)

    def __call__(self, line: str) -> None:
        if self.then is not None:
            self.then(line)
        now = time.monotonic()
        if self._ended or now - self._last < self.EVERY_S:
            return
        self._last = now
        live = read_work_json(self.out_dir, LIVE_FILE)
        start = read_work_json(self.out_dir, START_FILE)
        if not isinstance(live, dict) or not isinstance(start, dict):
            return
        plan_start_s = float(start["plan_start_s"])
        recovery, burst = self.plan.stages[-1], self.plan.stages[-2]
        if live.get("stage") != recovery.name:
            return
        records = read_records(self.out_dir)
        burst_start = plan_start_s + sum(s.duration_s for s in self.plan.stages[:-2])
        burst_end = burst_start + burst.duration_s
        threshold = self.threshold_s
        if threshold is None:
            steady = records.filter(pl.col("stage") == self.plan.stages[0].name)
            ttft = column_values(
                steady.filter(pl.col("ok")), pl.col("first_token_s") - pl.col("intended_send_s")
            )
            if ttft.size < 3:
                return
            threshold = RECOVERY_FACTOR * float(np.percentile(ttft, 95))
        now_s = float(live["t_s"])
        curve = recovery_curve(records, burst_start, burst_end, now_s, threshold)
        if curve.recovery_s is None:
            return
        e2e = column_values(
            records.filter((pl.col("stage") == recovery.name) & pl.col("ok")), pl.col("e2e_s")
        )
        margin = RECOVERY_WINDOW_S + 2.0 * (float(np.percentile(e2e, 95)) if e2e.size else 0.0)
        if now_s >= burst_end + curve.recovery_s + margin:
            self._ended = True
            (self.out_dir / WORK_DIR / END_STAGE_FILE).write_text(recovery.name)


class Progress:
    """Turns `.work/live.json` into one progress line (offered rate over the last 5 s), and
    tells `on_stage` the index of each stage the run enters, once, in order (a stage shorter
    than a poll is told too, when the next one is seen)."""

    WINDOW_S = 5.0

    def __init__(
        self,
        out_dir: Path,
        progress: Callable[[str], None] | None,
        on_stage: Callable[[int], None] | None = None,
    ) -> None:
        self._out_dir = out_dir
        self._progress = progress
        self._on_stage = on_stage
        self._stage = -1
        self._history: deque[tuple[float, int]] = deque()

    def update(self) -> None:
        if self._progress is None and self._on_stage is None:
            return
        live = read_work_json(self._out_dir, LIVE_FILE)
        if not isinstance(live, dict):
            return
        stage = int(live.get("stage_index", -1))
        while self._on_stage is not None and self._stage < stage:  # a short stage missed: each
            self._stage += 1
            self._on_stage(self._stage)
        if self._progress is None:
            return
        now_t, scheduled = float(live.get("t_s", 0.0)), int(live.get("scheduled", 0))
        history = self._history
        if not history or now_t > history[-1][0]:
            history.append((now_t, scheduled))
        while len(history) > 2 and history[0][0] < now_t - self.WINDOW_S:
            history.popleft()
        offered = None
        if len(history) > 1 and history[-1][0] > history[0][0]:
            offered = (history[-1][1] - history[0][1]) / (history[-1][0] - history[0][0])
        self._progress(format_progress(live, offered))
