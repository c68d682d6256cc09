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
import logging
import os
import time
import urllib.error
from typing import Any

import gevent
import gevent.event
import numpy as np
from locust import LoadTestShape, User, events, task
from locust.env import Environment
from locust.exception import LocustError
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from contracts.rundir import (
    DRIVER_ERROR_FILE,
    END_STAGE_FILE,
    LIVE_FILE,
    STAGE_ENDS_FILE,
    START_FILE,
    STOP_FILE,
    STOPPED_FILE,
    metrics_writer,
)
from locustfiles.driver import PlanDriver, Row, RunClock, Slot
from locustfiles.http_client import StreamClient, request_event
from locustfiles.live import LiveView, install_web_ui
from locustfiles.lost import LostWorker
from locustfiles.metrics import fetch_metrics, parse_metrics
from locustfiles.options import add_options, given_common
from locustfiles.rundir import finish_run, start_run
from locustfiles.runstate import FLUSH_S, START_DELAY_LOCAL_S, START_DELAY_MASTER_S, RunState

log = logging.getLogger("capplan.locust")

events.init_command_line_parser.add_listener(add_options)
_given: frozenset[str] = frozenset()  # which of -u, -r, -t the command line gave


_run: RunState | None = None


def _state(env: Environment) -> RunState:
    """This process's run state (built on first use)."""
    global _run
    if _run is None or _run.env is not env:
        _run = RunState(env, _given)
    return _run


def _fresh_state(env: Environment) -> RunState:
    """New run state for a new test (the web UI can start several in one process)."""
    global _run
    _run = RunState(env, _given)
    return _run


# --- background greenlets of the writing process -------------------------------------------


def _flusher(run: RunState) -> None:
    while not run.finished:
        gevent.sleep(FLUSH_S)
        run.flush()
        if run.clock is not None:
            run.write_json(LIVE_FILE, run.live())


def _scraper(run: RunState, host: str) -> None:
    writer = metrics_writer(run.out)
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
        gevent.sleep(max(0.0, 1.0 - run.clock.wall_s(run.clock.now() - t_s)))


def _worker_watch(run: RunState) -> None:
    """Master: a worker that stops answering Locust's heartbeat (missing after about 3 s)
    or leaves before its capplan_done is lost; its unreported requests become `lost` rows."""
    runner = run.env.runner
    assert isinstance(runner, MasterRunner) and run.clock is not None
    while not run.finished:
        gevent.sleep(0.5)
        for index, worker in enumerate(run.order):
            if worker in run.done_workers or worker in run.lost_workers:
                continue
            node = runner.clients.get(worker)
            if node is not None and node.state != STATE_MISSING:
                continue
            lost = LostWorker(worker, Slot(index, len(run.order)), run.clock.now())
            run.lost_workers[worker] = lost
            log.error(
                "capplan: worker %s (slot %d of %d) was lost at t=%.1f s; its scheduled "
                "requests without a record are counted as lost (error class 'lost')",
                worker,
                index + 1,
                len(run.order),
                lost.lost_at_s,
            )
            run.write_lost()
        if run.order and len(run.done_workers | set(run.lost_workers)) >= len(run.order):
            _finish(run)
            return


def _stop_watcher(run: RunState) -> None:
    """A `.work/stop` file (written by capplan on Ctrl-C) ends the run gracefully; an
    `.work/end-stage` file naming a stage ends that stage early (steady state reached).

    Run by capplan (`--llm-managed`), the run also ends when capplan itself is gone (killed
    with SIGKILL, out of memory): this process is re-parented, and load nobody asked for
    any more must not go on reaching the target."""
    stop_file = run.work / STOP_FILE
    end_file = run.work / END_STAGE_FILE
    parent = os.getppid()
    while not run.finished:
        if stop_file.exists() or (run.managed and os.getppid() != parent):
            _stop_everything(run)
            return
        if end_file.exists():
            name = end_file.read_text().strip()
            end_file.unlink(missing_ok=True)
            _end_stage(run, name)
        gevent.sleep(0.2)


def _end_stage(run: RunState, name: str) -> None:
    """End stage `name` on every load-generating process; its end time goes to
    `.work/stage_ends.json` for the stage summaries."""
    assert run.clock is not None
    runner = run.env.runner
    if isinstance(runner, MasterRunner):
        runner.send_message("capplan_end_stage", {"stage": name})
        ended = True
    else:
        ended = run.driver is not None and run.driver.end_stage(name)
    if ended:
        run.stage_ends_s[name] = run.clock.now()
        run.write_json(STAGE_ENDS_FILE, run.stage_ends_s)


def _stop_everything(run: RunState, *, stopping: bool = False) -> None:
    """Stop the plan now (Ctrl-C, the web UI's Stop, a stop file) and finish the run."""
    if run.clock is not None and run.stop_s is None:
        run.stop_s = run.clock.now()
        run.write_json(STOPPED_FILE, {"stop_s": run.stop_s})  # the summaries end there
    runner = run.env.runner
    if isinstance(runner, MasterRunner):
        runner.send_message("capplan_stop", {})
        deadline = time.monotonic() + 10.0
        while (
            len(run.done_workers | set(run.lost_workers)) < run.slot.count
            and time.monotonic() < deadline
        ):
            gevent.sleep(0.05)
    elif run.driver is not None:
        run.driver.stop()
        run.driver.cancel_all()
    _finish(run, stopping=stopping)


def _finish(run: RunState, *, stopping: bool = False) -> None:
    """Write what is left; a plain Locust run also finishes its run directory. Then stop
    Locust (unless it is stopping already: `stopping`)."""
    if run.finished:
        return
    run.finished = True
    if run.lost_workers:
        run.collect(run.lost_worker_rows())
        run.write_lost()
    run.flush()
    if run.clock is not None:
        live = run.live()
        live["done"] = True
        run.write_json(LIVE_FILE, live)
    if not run.managed and run.info is not None:
        if run.scraper is not None:
            run.scraper.kill()
        finish_run(run, run.info)
    runner = run.env.runner
    if runner is not None and not stopping:
        headless = bool(getattr(run.env.parsed_options, "headless", True))
        # Headless runs end the process; with the web UI the test stops and the UI stays.
        gevent.spawn_later(0.1, runner.quit if headless else runner.stop)


def _begin_writing(run: RunState, env: Environment) -> None:
    for note in run.locust_plan.notes:
        (log.warning if note.startswith("warning:") else log.info)(note)
    if not run.managed:
        run.info = start_run(run, env)
    run.open_writer()
    assert run.clock is not None
    run.write_json(
        START_FILE,
        {
            "start_epoch_s": run.clock.start_epoch_s,
            "plan_start_s": run.start_s,
            "workers": run.slot.count,
        },
    )
    np.percentile([0.0, 1.0], 95)  # numpy's first percentile call is slow: not during the plan
    run.write_json(LIVE_FILE, run.live())
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
            rows = [tuple(r) for r in data["rows"]]
            run.recorded_ids.setdefault(data["worker"], set()).update(r[1] for r in rows)
            run.collect(rows)
            run.worker_stats[data["worker"]] = (data["scheduled"], data["in_flight"])
            run.open_requests[data["worker"]] = [tuple(r) for r in data.get("open", [])]

        def on_done(msg: Any, **_: Any) -> None:
            run = _state(environment)
            run.done_workers.add(msg.data["worker"])
            if msg.data.get("error"):  # its driver failed: the run fails when it ends
                error = f"worker {msg.data['worker']}: {msg.data['error']}"
                run.write_json(DRIVER_ERROR_FILE, {"error": error})
            if len(run.done_workers | set(run.lost_workers)) >= run.slot.count:
                _finish(run)

        runner.register_message("capplan_rows", on_rows)
        runner.register_message("capplan_done", on_done)
    elif isinstance(runner, WorkerRunner):

        def on_start(msg: Any, **_: Any) -> None:
            run = _fresh_state(environment)  # arrives before the master's spawn message
            data = msg.data
            run.adopt(data)  # plan, profile and options: this worker may be on another host
            run.clock = RunClock(data["start_epoch_s"], run.time_scale)
            run.start_s = data["plan_start_s"]
            order = data["order"]
            run.slot = Slot(order.index(runner.client_id), len(order))
            run.started.set()

        def on_stop(msg: Any, **_: Any) -> None:
            run = _state(environment)
            if run.driver is not None:
                run.driver.stop()
                run.driver.cancel_all()

        def on_end_stage(msg: Any, **_: Any) -> None:
            run = _state(environment)
            if run.driver is not None:
                run.driver.end_stage(msg.data["stage"])

        runner.register_message("capplan_start", on_start)
        runner.register_message("capplan_stop", on_stop)
        runner.register_message("capplan_end_stage", on_end_stage)


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
    run.clock = RunClock(epoch, run.time_scale)
    if isinstance(runner, MasterRunner):
        order = sorted(c.id for c in runner.clients.all if c.state != STATE_MISSING)
        run.order = order
        run.slot = Slot(0, max(1, len(order)))
        run.start_s = run.clock.now() + START_DELAY_MASTER_S
        runner.send_message(
            "capplan_start",
            {
                "start_epoch_s": epoch,
                "plan_start_s": run.start_s,
                "order": order,
                # the web form's values reach only the master; remote workers have no files
                **run.start_payload(),
            },
        )
        gevent.spawn(_worker_watch, run)
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
        if run.driver is not None:  # a second user here (Locust rebalancing after a loss)
            while True:
                gevent.sleep(3600)
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
        error: str | None = None
        try:
            driver.run(run.start_s)
        except Exception as err:  # the driver failed: capplan says so (the rows stay written)
            error = f"{type(err).__name__}: {err}"
            if not worker_mode:
                run.write_json(DRIVER_ERROR_FILE, {"error": error})
            raise
        finally:
            if worker_mode:
                assert isinstance(runner, WorkerRunner)
                if sender is not None:
                    sender.kill()
                _send_rows(run, runner)
                done = {"worker": runner.client_id, "error": error}
                runner.send_message("capplan_done", done)
            else:
                _finish(run)
        while True:  # the run is over; wait for Locust to stop this user
            gevent.sleep(3600)


def _send_rows(run: RunState, runner: WorkerRunner) -> None:
    rows, run.rows = run.rows, []
    assert run.driver is not None
    runner.send_message(
        "capplan_rows",
        {
            "worker": runner.client_id,
            "rows": [list(r) for r in rows],
            "scheduled": run.driver.scheduled,
            "in_flight": run.driver.in_flight,
            # closed-loop requests have no schedule the master could recompute
            "open": run.driver.open_requests() if run.has_closed_stage else [],
        },
    )


def _worker_sender(run: RunState) -> None:
    runner = run.env.runner
    assert isinstance(runner, WorkerRunner)
    while True:
        gevent.sleep(FLUSH_S)
        _send_rows(run, runner)


class PlanShape(LoadTestShape):
    """One driver user per load-generating process for as long as the plan runs.

    The plan's own timing lives in the driver; this shape only places the drivers and stops
    the test if the drivers never report back (plan + drain + 60 s). It reads Locust's
    common options (-u, -r, -t, the web UI's form): they set the plan (see `RunState`).
    """

    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        run = _state(self.runner.environment) if self.runner is not None else None
        if run is None:
            return None
        runner = self.runner
        n = 1
        if isinstance(runner, MasterRunner):  # one driver per worker still answering
            n = max(1, len(runner.clients.all) - len(runner.clients.missing))
        limit = sum(s.duration_s for s in run.plan.stages) + run.options.drain_s + 60.0
        if self.get_run_time() > limit:
            return None
        return n, float(n)
