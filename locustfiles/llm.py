"""capplan's locustfile: profile-driven, open-loop LLM load with per-request records.

Run it as Locust users expect (web UI or headless, local or master/worker):

    locust -f locustfiles/llm.py --host http://127.0.0.1:8000 --llm-model llama \
        --llm-profile profile.json --llm-plan steady-burst-recovery --llm-out runs/x

`capplan loadtest` runs this file headless and reads what it writes. The load comes from a
stage plan, not from Locust's user count: a shape keeps one driver user per process (one
per worker in distributed mode), and each driver runs the plan on an absolute schedule
(see locustfiles/driver.py). Rows go to `<out>/records.parts/` about every second; workers
send theirs to the master with Locust custom messages and only the master (or the single
local process) writes. The master also scrapes the target's /metrics every second and keeps
`<out>/.work/live.json` up to date for progress displays.

Options (all prefixed `--llm-` because Locust owns `--profile`): profile, model, endpoint,
plan, rate, users, duration, arrival, seed, api-key-env, out, replay, speed, ...
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
import urllib.error
from collections import deque
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import numpy as np
from locust import LoadTestShape, User, events, task
from locust.env import Environment
from locust.exception import LocustError
from locust.runners import MasterRunner, WorkerRunner

from locustfiles.driver import DriverOptions, PlanDriver, ReplayLog, Row, RunClock, Slot
from locustfiles.http_client import StreamClient, request_event
from locustfiles.metrics import fetch_metrics, parse_metrics
from locustfiles.recorder import (
    METRICS_PARTS,
    RECORD_NAMES,
    RECORDS_PARTS,
    PartWriter,
)
from locustfiles.replay import read_log_table, slice_log, to_replay
from locustfiles.stages import resolve_plan
from planner.run_schema import RECORD_COLUMNS, SERVER_METRIC_COLUMNS, StagePlan
from profiles.model import Profile, load_profile
from profiles.presets import preset_profile
from profiles.workload import WorkloadStream

log = logging.getLogger("capplan.locust")

WORK_DIR = ".work"
FLUSH_S = 0.9  # rows reach disk at least every second
START_DELAY_LOCAL_S = 0.5
START_DELAY_MASTER_S = 1.0

_I_STAGE = RECORD_NAMES.index("stage")
_I_END = RECORD_NAMES.index("end_s")
_I_TTFT = RECORD_NAMES.index("ttft_s")
_I_OK = RECORD_NAMES.index("ok")


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    parser.add_argument(
        "--llm-profile", default="", help="capplan profile JSON (default: the built-in chat preset)"
    )
    parser.add_argument("--llm-model", default="", help="model name sent in each request")
    parser.add_argument(
        "--llm-endpoint",
        default="chat",
        choices=["chat", "completions"],
        help="OpenAI endpoint kind",
    )
    parser.add_argument(
        "--llm-plan",
        default="",
        help="steady | steady-burst-recovery | steps | a YAML/JSON plan file",
    )
    parser.add_argument(
        "--llm-rate", type=float, default=0.0, help="open-loop rate (req/s) for built-in plans"
    )
    parser.add_argument(
        "--llm-users", type=int, default=0, help="closed-loop users for built-in plans"
    )
    parser.add_argument(
        "--llm-duration", type=float, default=0.0, help="stage length (s) for built-in plans"
    )
    parser.add_argument("--llm-arrival", default="poisson", help="poisson | constant | gamma:K")
    parser.add_argument("--llm-seed", type=int, default=0, help="seed of requests and arrivals")
    parser.add_argument(
        "--llm-api-key-env", default="", help="environment variable holding the API key"
    )
    parser.add_argument(
        "--llm-out", default="", help="folder for records (default: runs/locust-<time>)"
    )
    parser.add_argument(
        "--llm-replay", default="", help="request log to replay (stages with arrival: replay)"
    )
    parser.add_argument(
        "--llm-replay-start", type=float, default=0.0, help="log second where the replay starts"
    )
    parser.add_argument("--llm-speed", type=float, default=1.0, help="replay speed-up factor")
    parser.add_argument(
        "--llm-no-ignore-eos", action="store_true", help="do not send ignore_eos/min_tokens"
    )
    parser.add_argument(
        "--llm-request-timeout",
        type=float,
        default=300.0,
        help="seconds before a request times out",
    )
    parser.add_argument(
        "--llm-max-concurrency",
        type=int,
        default=0,
        help="client cap on requests in flight (0: none)",
    )
    parser.add_argument(
        "--llm-drain",
        type=float,
        default=30.0,
        help="seconds to wait for in-flight requests at the end",
    )
    parser.add_argument(
        "--llm-no-metrics", action="store_true", help="do not scrape the target's /metrics"
    )
    parser.add_argument(
        "--llm-run-epoch",
        type=float,
        default=0.0,
        help="Unix time of the run's t = 0 (append runs)",
    )


def _load_profile(path: str) -> Profile:
    return load_profile(path) if path else preset_profile("chat")


class _Run:
    """Everything one Locust process needs for the plan, built once from the options."""

    def __init__(self, env: Environment) -> None:
        o: Any = env.parsed_options
        self.env = env
        self.profile = _load_profile(o.llm_profile)
        self.plan: StagePlan = resolve_plan(
            o.llm_plan or None,
            self.profile,
            rate_rps=o.llm_rate or None,
            users=o.llm_users or None,
            duration_s=o.llm_duration or None,
            arrival=o.llm_arrival,
        )
        self.replay: ReplayLog | None = None
        if o.llm_replay:
            span = (
                sum(s.duration_s for s in self.plan.stages if s.arrival == "replay") * o.llm_speed
            )
            table = slice_log(read_log_table(o.llm_replay), o.llm_replay_start, span + 1.0)
            self.replay = to_replay(table, o.llm_speed, o.llm_replay_start)
        api_key = os.environ.get(o.llm_api_key_env) if o.llm_api_key_env else None
        self.options = DriverOptions(
            endpoint=o.llm_endpoint,
            model=o.llm_model or "default",
            seed=o.llm_seed,
            ignore_eos=not o.llm_no_ignore_eos,
            request_timeout_s=o.llm_request_timeout,
            max_concurrency=o.llm_max_concurrency or None,
            drain_s=o.llm_drain,
            api_key=api_key,
        )
        self.out = Path(o.llm_out or f"runs/locust-{time.strftime('%Y%m%d-%H%M%S')}")
        self.work = self.out / WORK_DIR
        self.run_epoch = o.llm_run_epoch or 0.0
        self.scrape = not o.llm_no_metrics
        self.started = gevent.event.Event()
        self.clock: RunClock | None = None
        self.start_s = 0.0
        self.slot = Slot()
        self.driver: PlanDriver | None = None
        self.rows: list[Row] = []
        self.done_workers: set[str] = set()
        self.worker_stats: dict[str, tuple[int, int]] = {}
        self.recent: deque[tuple[float, bool, float | None, str]] = deque()
        self.total_rows = 0
        self.total_errors = 0
        self.finished = False
        self.writer: PartWriter | None = None

    def make_stream(self, seed: int) -> WorkloadStream:
        return WorkloadStream(self.profile, seed)

    # --- writing (local process or master) ---------------------------------------------

    def open_writer(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.writer = PartWriter(self.out / RECORDS_PARTS, RECORD_COLUMNS)

    def collect(self, rows: list[Row]) -> None:
        self.rows.extend(rows)
        for r in rows:
            self.total_rows += 1
            if not r[_I_OK]:
                self.total_errors += 1
            self.recent.append((r[_I_END], bool(r[_I_OK]), r[_I_TTFT], r[_I_STAGE]))

    def flush(self) -> None:
        if self.writer is not None and self.rows:
            rows, self.rows = self.rows, []
            self.writer.write(rows)

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        tmp = self.work / (name + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.work / name)

    def live(self) -> dict[str, Any]:
        assert self.clock is not None
        now = self.clock.now()
        while self.recent and self.recent[0][0] < now - 10.0:
            self.recent.popleft()
        if self.driver is not None:
            scheduled, in_flight = self.driver.scheduled, self.driver.in_flight
        else:
            scheduled = sum(s for s, _ in self.worker_stats.values())
            in_flight = sum(f for _, f in self.worker_stats.values())
        window = [r for r in self.recent if r[0] >= now - 5.0]
        ttfts = [r[2] for r in self.recent if r[1] and r[2] is not None]
        elapsed = now - self.start_s
        stage, stage_i, t = "", -1, 0.0
        for i, s in enumerate(self.plan.stages):
            if elapsed >= t:
                stage, stage_i = s.name, i
            t += s.duration_s
        if elapsed >= t:
            stage = "drain"
        return {
            "t_s": now,
            "elapsed_s": elapsed,
            "stage": stage,
            "stage_index": stage_i,
            "scheduled": scheduled,
            "finished": self.total_rows,
            "in_flight": in_flight,
            "errors": self.total_errors,
            "achieved_rps": sum(1 for r in window if r[1]) / 5.0,
            "ttft_p95_s": float(np.percentile(ttfts, 95)) if ttfts else None,
        }


_run: _Run | None = None


def _state(env: Environment) -> _Run:
    """This process's run state (built on first use)."""
    global _run
    if _run is None or _run.env is not env:
        _run = _Run(env)
    return _run


def _fresh_state(env: Environment) -> _Run:
    """New run state for a new test (the web UI can start several in one process)."""
    global _run
    _run = _Run(env)
    return _run


# --- background greenlets of the writing process -------------------------------------------


def _flusher(run: _Run) -> None:
    while not run.finished:
        gevent.sleep(FLUSH_S)
        run.flush()
        if run.clock is not None:
            run.write_json("live.json", run.live())


def _scraper(run: _Run, host: str) -> None:
    writer = PartWriter(run.out / METRICS_PARTS, SERVER_METRIC_COLUMNS)
    url = host.rstrip("/") + "/metrics"
    assert run.clock is not None
    while not run.finished:
        t_s = run.clock.now()
        try:
            writer.write(parse_metrics(fetch_metrics(url), t_s))
        except urllib.error.HTTPError as err:
            if err.code in (404, 405, 501):
                log.warning("no Prometheus metrics at %s (HTTP %s): not scraping", url, err.code)
                return
        except (OSError, ValueError):
            pass  # the target may be down for a while; keep trying
        gevent.sleep(max(0.0, 1.0 - (run.clock.now() - t_s)))


def _stop_watcher(run: _Run) -> None:
    """A `.work/stop` file (written by capplan on Ctrl-C) ends the run gracefully."""
    stop_file = run.work / "stop"
    while not run.finished:
        if stop_file.exists():
            _stop_everything(run)
            return
        gevent.sleep(0.2)


def _stop_everything(run: _Run) -> None:
    runner = run.env.runner
    if isinstance(runner, MasterRunner):
        runner.send_message("capplan_stop", {})
        deadline = time.monotonic() + 10.0
        while len(run.done_workers) < run.slot.count and time.monotonic() < deadline:
            gevent.sleep(0.05)
    elif run.driver is not None:
        run.driver.stop()
        run.driver.cancel_all()
    _finish(run)


def _finish(run: _Run) -> None:
    if run.finished:
        return
    run.finished = True
    run.flush()
    if run.clock is not None:
        live = run.live()
        live["done"] = True
        run.write_json("live.json", live)
    runner = run.env.runner
    if runner is not None:
        headless = bool(getattr(run.env.parsed_options, "headless", True))
        # Headless runs end the process; with the web UI the test stops and the UI stays.
        gevent.spawn_later(0.1, runner.quit if headless else runner.stop)


def _begin_writing(run: _Run, env: Environment) -> None:
    run.open_writer()
    assert run.clock is not None
    run.write_json(
        "start.json",
        {
            "start_epoch_s": run.clock.start_epoch_s,
            "plan_start_s": run.start_s,
            "workers": run.slot.count,
        },
    )
    np.percentile([0.0, 1.0], 95)  # numpy's first percentile call is slow: not during the plan
    run.write_json("live.json", run.live())
    gevent.spawn(_flusher, run)
    gevent.spawn(_stop_watcher, run)
    if run.scrape and env.host:
        gevent.spawn(_scraper, run, env.host)


# --- Locust events ---------------------------------------------------------------------------


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    options = environment.parsed_options
    if options is not None and getattr(options, "llm_request_timeout", None):
        LLMUser.network_timeout = float(options.llm_request_timeout)
    runner = environment.runner
    if isinstance(runner, MasterRunner):

        def on_rows(msg: Any, **_: Any) -> None:
            run = _state(environment)
            data = msg.data
            run.collect([tuple(r) for r in data["rows"]])
            run.worker_stats[data["worker"]] = (data["scheduled"], data["in_flight"])

        def on_done(msg: Any, **_: Any) -> None:
            run = _state(environment)
            run.done_workers.add(msg.data["worker"])
            if len(run.done_workers) >= run.slot.count:
                _finish(run)

        runner.register_message("capplan_rows", on_rows)
        runner.register_message("capplan_done", on_done)
    elif isinstance(runner, WorkerRunner):

        def on_start(msg: Any, **_: Any) -> None:
            run = _fresh_state(environment)  # arrives before the master's spawn message
            data = msg.data
            run.clock = RunClock(data["start_epoch_s"])
            run.start_s = data["plan_start_s"]
            order = data["order"]
            run.slot = Slot(order.index(runner.client_id), len(order))
            run.started.set()

        def on_stop(msg: Any, **_: Any) -> None:
            run = _state(environment)
            if run.driver is not None:
                run.driver.stop()
                run.driver.cancel_all()

        runner.register_message("capplan_start", on_start)
        runner.register_message("capplan_stop", on_stop)


def _calm_gc() -> None:
    # A full collection over the many small objects of a long run can stall the dispatcher
    # for tens of ms; freeze what exists and collect the young generation less often.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    _calm_gc()
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return  # workers wait for the master's capplan_start message
    run = _fresh_state(environment)
    epoch = run.run_epoch or time.time()
    run.clock = RunClock(epoch)
    if isinstance(runner, MasterRunner):
        order = sorted(c.id for c in runner.clients.all)
        run.slot = Slot(0, max(1, len(order)))
        run.start_s = run.clock.now() + START_DELAY_MASTER_S
        runner.send_message(
            "capplan_start", {"start_epoch_s": epoch, "plan_start_s": run.start_s, "order": order}
        )
    else:
        run.slot = Slot()
        run.start_s = run.clock.now() + START_DELAY_LOCAL_S
    _begin_writing(run, environment)
    run.started.set()


class LLMUser(User):
    """Runs the stage plan of this process: one instance per Locust process (see the shape).

    Requests go through a StreamClient (geventhttpclient, no retries, pooled keep-alive
    connections) and are reported to Locust's statistics as Locust's own clients do.
    """

    connection_timeout = 10.0
    network_timeout = 300.0

    @task
    def run_plan(self) -> None:
        run = _state(self.environment)
        run.started.wait()
        assert run.clock is not None
        runner = self.environment.runner
        worker_mode = isinstance(runner, WorkerRunner)

        def emit(row: Row) -> None:
            if worker_mode:
                run.rows.append(row)  # sent to the master by _worker_sender
            else:
                run.collect([row])

        if not self.host:
            raise LocustError("no target: give --host")
        client = StreamClient(
            self.host,
            connection_timeout_s=self.connection_timeout,
            network_timeout_s=self.network_timeout,
            on_request=request_event(self.environment),
        )
        driver = PlanDriver(
            run.plan,
            run.make_stream,
            run.options,
            client,
            emit,
            run.clock,
            run.slot,
            run.replay,
        )
        run.driver = driver
        sender = gevent.spawn(_worker_sender, run) if worker_mode else None
        try:
            driver.run(run.start_s)
        finally:
            if worker_mode:
                assert isinstance(runner, WorkerRunner)
                if sender is not None:
                    sender.kill()
                _send_rows(run, runner)
                runner.send_message("capplan_done", {"worker": runner.client_id})
            else:
                _finish(run)
        while True:  # the run is over; wait for Locust to stop this user
            gevent.sleep(3600)


def _send_rows(run: _Run, runner: WorkerRunner) -> None:
    rows, run.rows = run.rows, []
    assert run.driver is not None
    runner.send_message(
        "capplan_rows",
        {
            "worker": runner.client_id,
            "rows": [list(r) for r in rows],
            "scheduled": run.driver.scheduled,
            "in_flight": run.driver.in_flight,
        },
    )


def _worker_sender(run: _Run) -> None:
    runner = run.env.runner
    assert isinstance(runner, WorkerRunner)
    while True:
        gevent.sleep(FLUSH_S)
        _send_rows(run, runner)


class PlanShape(LoadTestShape):
    """One driver user per load-generating process for as long as the plan runs.

    The plan's own timing lives in the driver; this shape only places the drivers and stops
    the test if the drivers never report back (plan + drain + 60 s).
    """

    def tick(self) -> tuple[int, float] | None:
        run = _state(self.runner.environment) if self.runner is not None else None
        if run is None:
            return None
        runner = self.runner
        n = max(1, len(runner.clients.all)) if isinstance(runner, MasterRunner) else 1
        limit = sum(s.duration_s for s in run.plan.stages) + run.options.drain_s + 60.0
        if self.get_run_time() > limit:
            return None
        return n, float(n)
