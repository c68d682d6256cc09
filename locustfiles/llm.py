"""capplan's locustfile: profile-driven, open-loop LLM load with per-request records.

Run it as Locust users expect (web UI or headless, local or master/worker):

    locust -f locustfiles/llm.py --host http://127.0.0.1:8000 --llm-model llama \
        --headless -u 8 -r 4 -t 60s --llm-out runs/x
    locust -f locustfiles/llm.py --host http://127.0.0.1:8000 --llm-model llama \
        --llm-profile profile.json --llm-plan steady-burst-recovery -t 5m --llm-out runs/y

Without --llm-plan the shape reads Locust's common options (-u, -r, -t, or the web UI's start
form): one closed-loop stage of -u users started at -r per second, or with --llm-rate one
open-loop stage, lasting -t. With a plan, -t cuts it (see locustfiles/stages.locust_plan).
`capplan loadtest` runs this file headless (--llm-managed) and writes run.json and
stages.json itself; run directly, the file writes them (locustfiles/rundir.py). The web UI
gets a live capplan tab and /capplan/live (locustfiles/live.py). The load comes from a
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
from locust import FastHttpUser, LoadTestShape, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from locustfiles.driver import DriverOptions, PlanDriver, ReplayLog, Row, RunClock, Slot
from locustfiles.live import GoodThresholds, LiveStats, LiveView, install_web_ui
from locustfiles.metrics import fetch_metrics, parse_metrics
from locustfiles.options import add_options, common_options, given_common
from locustfiles.recorder import (
    METRICS_PARTS,
    RECORD_NAMES,
    RECORDS_PARTS,
    PartWriter,
)
from locustfiles.replay import read_log_table, slice_log, to_replay
from locustfiles.rundir import finish_run, fresh_dir, start_run
from locustfiles.stages import LocustPlan, locust_plan
from planner.run_schema import RECORD_COLUMNS, SERVER_METRIC_COLUMNS, RunInfo, StagePlan
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


events.init_command_line_parser.add_listener(add_options)
_given: frozenset[str] = frozenset()  # which of -u, -r, -t the command line gave


def _load_profile(path: str) -> Profile:
    return load_profile(path) if path else preset_profile("chat")


class _Run:
    """Everything one Locust process needs for the plan, built once from the options."""

    def __init__(self, env: Environment) -> None:
        o: Any = env.parsed_options
        self.env = env
        self.profile = _load_profile(o.llm_profile)
        from_form = env.web_ui is not None and not (o.headless or o.autostart)
        master = isinstance(env.runner, MasterRunner)
        self.locust_plan: LocustPlan = locust_plan(
            o.llm_plan or None,
            self.profile,
            common_options(o, _given, from_form),
            rate_rps=o.llm_rate or None,
            users=o.llm_users or None,
            duration_s=o.llm_duration or None,
            arrival=o.llm_arrival,
            start_delay_s=START_DELAY_MASTER_S if master else START_DELAY_LOCAL_S,
        )
        self.plan: StagePlan = self.locust_plan.plan
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
        self.managed = bool(o.llm_managed)
        self.out = Path(o.llm_out or f"runs/locust-{time.strftime('%Y%m%d-%H%M%S')}")
        if not self.managed:
            self.out = fresh_dir(self.out)
        self.info: RunInfo | None = None
        self.stop_s: float | None = None  # run clock when the run was stopped early
        self.scraper: gevent.Greenlet | None = None
        self.live_stats = LiveStats(GoodThresholds(o.llm_slo_ttft or None, o.llm_slo_tpot or None))
        self._view: tuple[float, LiveView] | None = None
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
        self.live_stats.add(rows)

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
        stage, stage_i = self.stage_at(elapsed)
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

    def stage_at(self, elapsed_s: float) -> tuple[str, int]:
        """(name, index) of the stage running `elapsed_s` into the plan; 'drain' after it."""
        stage, stage_i, t = "", -1, 0.0
        for i, s in enumerate(self.plan.stages):
            if elapsed_s >= t:
                stage, stage_i = s.name, i
            t += s.duration_s
        return ("drain" if elapsed_s >= t else stage), stage_i

    def view(self) -> LiveView | None:
        """The capplan tab's numbers (computed at most once a second: the UI polls often)."""
        if self.clock is None:
            return None
        now = self.clock.now()
        if self._view is not None and now - self._view[0] < 1.0 and not self.finished:
            return self._view[1]
        live = self.live()
        view = LiveView(
            run_dir=str(self.out.resolve()),
            t_s=now,
            elapsed_s=now - self.start_s,
            stage=live["stage"],
            scheduled=live["scheduled"],
            in_flight=live["in_flight"],
            goodput_ttft_s=self.live_stats.thresholds.ttft_s,
            goodput_tpot_s=self.live_stats.thresholds.tpot_s,
            done=self.finished,
            stages=self.live_stats.stages(self.plan, self.start_s, now),
        )
        self._view = (now, view)
        return view


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


def _stop_everything(run: _Run, *, stopping: bool = False) -> None:
    """Stop the plan now (Ctrl-C, the web UI's Stop, a stop file) and finish the run."""
    if run.clock is not None and run.stop_s is None:
        run.stop_s = run.clock.now()
    runner = run.env.runner
    if isinstance(runner, MasterRunner):
        runner.send_message("capplan_stop", {})
        deadline = time.monotonic() + 10.0
        while len(run.done_workers) < run.slot.count and time.monotonic() < deadline:
            gevent.sleep(0.05)
    elif run.driver is not None:
        run.driver.stop()
        run.driver.cancel_all()
    _finish(run, stopping=stopping)


def _finish(run: _Run, *, stopping: bool = False) -> None:
    """Write what is left; a plain Locust run also finishes its run directory. Then stop
    Locust (unless it is stopping already: `stopping`)."""
    if run.finished:
        return
    run.finished = True
    run.flush()
    if run.clock is not None:
        live = run.live()
        live["done"] = True
        run.write_json("live.json", live)
    if not run.managed and run.info is not None:
        if run.scraper is not None:
            run.scraper.kill()
        plan_end_s = run.start_s + sum(s.duration_s for s in run.plan.stages)
        early = run.stop_s is not None and run.stop_s < plan_end_s
        summaries = finish_run(
            run.out,
            run.info,
            run.locust_plan,
            run.start_s,
            stop_s=run.stop_s,
            interrupted=early and not run.locust_plan.until_stopped,
        )
        log.info(
            "capplan: wrote %s (run.json, records.parquet, stages.json): %d requests in %s",
            run.out.resolve(),
            run.total_rows,
            ", ".join(f"{s.name} {s.duration_s:.1f} s" for s in summaries) or "no stage",
        )
    runner = run.env.runner
    if runner is not None and not stopping:
        headless = bool(getattr(run.env.parsed_options, "headless", True))
        # Headless runs end the process; with the web UI the test stops and the UI stays.
        gevent.spawn_later(0.1, runner.quit if headless else runner.stop)


def _begin_writing(run: _Run, env: Environment) -> None:
    for note in run.locust_plan.notes:
        (log.warning if note.startswith("warning:") else log.info)(note)
    if not run.managed:
        o: Any = env.parsed_options
        assert run.clock is not None
        run.info = start_run(
            run.out,
            run.locust_plan,
            host=env.host or "",
            model=run.options.model,
            endpoint=run.options.endpoint,
            profile_source=o.llm_profile or "preset:chat",
            profile_digest=run.profile.digest(),
            seed=run.options.seed,
            workers=run.slot.count if isinstance(env.runner, MasterRunner) else 0,
            max_concurrency=run.options.max_concurrency,
            ignore_eos=run.options.ignore_eos,
            start_epoch_s=run.clock.start_epoch_s,
        )
        log.info("capplan run directory: %s", run.out.resolve())
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
        run.scraper = gevent.spawn(_scraper, run, env.host)


# --- Locust events ---------------------------------------------------------------------------


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    global _given
    options = environment.parsed_options
    _given = given_common(options)
    if environment.web_ui is not None and not isinstance(environment.runner, WorkerRunner):

        def view() -> LiveView | None:
            run = _run
            return run.view() if run is not None and run.env is environment else None

        install_web_ui(environment.web_ui, view)
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
            if "plan" in data:
                run.plan = StagePlan.model_validate(data["plan"])
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


@events.test_stopping.add_listener
def _on_test_stopping(environment: Environment, **_: Any) -> None:
    """The web UI's Stop, Ctrl-C or Locust's own quit: stop the plan and keep every row."""
    run = _run
    if isinstance(environment.runner, WorkerRunner) or run is None or run.env is not environment:
        return
    if not run.finished and run.clock is not None:
        _stop_everything(run, stopping=True)


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
            "capplan_start",
            {
                "start_epoch_s": epoch,
                "plan_start_s": run.start_s,
                "order": order,
                "plan": run.plan.model_dump(),  # the web form's values reach only the master
            },
        )
    else:
        run.slot = Slot()
        run.start_s = run.clock.now() + START_DELAY_LOCAL_S
    _begin_writing(run, environment)
    run.started.set()


class LLMUser(FastHttpUser):
    """Runs the stage plan of this process: one instance per Locust process (see the shape)."""

    concurrency = 100_000  # connection pool size: never a hidden client-side cap
    connection_timeout = 10.0
    network_timeout = 300.0
    max_retries = 0

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

        driver = PlanDriver(
            run.plan,
            run.make_stream,
            run.options,
            self.client,
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
    the test if the drivers never report back (plan + drain + 60 s). It reads Locust's
    common options (-u, -r, -t, the web UI's form): they set the plan (see `_Run`).
    """

    use_common_options = True

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
