"""What one Locust process keeps for its plan: options, plan, clock, rows, live numbers.

Built from the parsed options at the start of each test (the web UI can start several in
one process); used by the events, the user and the shape of locustfiles/llm.py.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import numpy as np
from locust.env import Environment
from locust.runners import MasterRunner

from contracts.jsonio import write_atomic
from contracts.run import LostWorkerReport, RunInfo, StagePlan
from contracts.rundir import (
    LOST_FILE,
    RECORD_NAMES,
    WORK_DIR,
    PartWriter,
    fresh_dir,
    records_writer,
)
from locustfiles.driver import DriverOptions, PlanDriver, ReplayLog, Row, RunClock, Slot
from locustfiles.live import GoodThresholds, LiveStats, LiveView
from locustfiles.lost import LostWorker, lost_rows, slot_schedule, with_open
from locustfiles.options import common_options
from locustfiles.replay import read_log_table, slice_log, to_replay
from locustfiles.stages import LocustPlan, locust_plan
from profiles.model import Profile, load_profile
from profiles.presets import preset_profile
from profiles.workload import WorkloadStream

FLUSH_S = 0.9  # rows reach disk at least every second
START_DELAY_LOCAL_S = 0.5
START_DELAY_MASTER_S = 1.0

_I_STAGE = RECORD_NAMES.index("stage")
_I_END = RECORD_NAMES.index("end_s")
_I_TTFT = RECORD_NAMES.index("ttft_s")
_I_OK = RECORD_NAMES.index("ok")


def _load_profile(path: str) -> Profile:
    return load_profile(path) if path else preset_profile("chat")


class RunState:
    """Everything one Locust process needs for the plan, built once from the options."""

    def __init__(self, env: Environment, given: frozenset[str]) -> None:
        o: Any = env.parsed_options
        self.env = env
        self.profile = _load_profile(o.llm_profile)
        from_form = env.web_ui is not None and not (o.headless or o.autostart)
        master = isinstance(env.runner, MasterRunner)
        self.locust_plan: LocustPlan = locust_plan(
            o.llm_plan or None,
            self.profile,
            common_options(o, given, from_form),
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
        self.api_key_env = o.llm_api_key_env or ""
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
        self.time_scale = float(getattr(o, "llm_time_scale", 1.0) or 1.0)
        self.scrape = not o.llm_no_metrics
        self.started = gevent.event.Event()
        self.clock: RunClock | None = None
        self.start_s = 0.0
        self.slot = Slot()
        self.driver: PlanDriver | None = None
        self.rows: list[Row] = []
        self.done_workers: set[str] = set()
        self.worker_stats: dict[str, tuple[int, int]] = {}
        self.order: list[str] = []  # master: worker ids in slot order
        self.recorded_ids: dict[str, set[str]] = {}  # master: request ids each worker sent
        # master: (stage, request_id, intended_send_s) each worker had in flight at its last
        # report; a lost worker's closed-loop requests are named from these
        self.open_requests: dict[str, list[tuple[str, str, float]]] = {}
        self.lost_workers: dict[str, LostWorker] = {}
        self.lost_counts: dict[str, int] = {}  # lost rows written per lost worker
        self.recent: deque[tuple[float, bool, float | None, str]] = deque()
        self.total_rows = 0
        self.total_errors = 0
        self.finished = False
        self.writer: PartWriter | None = None
        self.stage_ends_s: dict[str, float] = {}

    # --- what a worker gets from the master (it may run on another host) --------------------

    def start_payload(self) -> dict[str, Any]:
        """The plan, profile and driver options for the capplan_start message: a worker on
        another host has none of the master's files. The API key itself is never sent: a
        worker reads the named variable from its own environment."""
        o = self.options
        payload: dict[str, Any] = {
            "plan": self.plan.model_dump(),
            "profile_json": self.profile.to_json(),
            "time_scale": self.time_scale,
            "options": {
                "endpoint": o.endpoint,
                "model": o.model,
                "seed": o.seed,
                "ignore_eos": o.ignore_eos,
                "request_timeout_s": o.request_timeout_s,
                "max_concurrency": o.max_concurrency,
                "drain_s": o.drain_s,
            },
            "api_key_env": self.api_key_env,
        }
        if self.replay is not None:
            r = self.replay
            payload["replay"] = {
                "arrival_s": r.arrival_s.tolist(),
                "input_tokens": r.input_tokens.tolist(),
                "output_tokens": r.output_tokens.tolist(),
                "speed": r.speed,
                "origin_s": r.origin_s,
            }
        return payload

    @property
    def has_closed_stage(self) -> bool:
        return any(s.kind == "closed" for s in self.plan.stages)

    def adopt(self, data: dict[str, Any]) -> None:
        """Take the master's plan, profile and options (a worker, from capplan_start)."""
        if "plan" in data:
            self.plan = StagePlan.model_validate(data["plan"])
        if "profile_json" not in data:
            return  # an older master: keep this worker's own files
        self.profile = Profile.model_validate_json(data["profile_json"])  # checked by the master
        self.time_scale = float(data["time_scale"])
        key_env = data.get("api_key_env") or ""
        self.options = DriverOptions(
            **data["options"], api_key=os.environ.get(key_env) if key_env else None
        )
        replay = data.get("replay")
        self.replay = None
        if replay is not None:
            self.replay = ReplayLog(
                arrival_s=np.asarray(replay["arrival_s"], dtype=float),
                input_tokens=np.asarray(replay["input_tokens"], dtype=np.int64),
                output_tokens=np.asarray(replay["output_tokens"], dtype=np.int64),
                speed=float(replay["speed"]),
                origin_s=float(replay["origin_s"]),
            )

    def lost_reports(self) -> list[LostWorkerReport]:
        """run.json's account of the lost workers (after their lost rows were made)."""
        return [
            LostWorkerReport(
                worker=w,
                slot=lost.slot.index + 1,
                of=lost.slot.count,
                lost_at_s=lost.lost_at_s,
                lost_requests=self.lost_counts.get(w, 0),
            )
            for w, lost in self.lost_workers.items()
        ]

    def make_stream(self, seed: int) -> WorkloadStream:
        return WorkloadStream(self.profile, seed)

    # --- writing (local process or master) ---------------------------------------------

    def open_writer(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.writer = records_writer(self.out)

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

    def lost_worker_rows(self) -> list[Row]:
        """The `lost` rows of every lost worker (master, at the end of the run)."""
        rows: list[Row] = []
        for lost in self.lost_workers.values():
            schedule = slot_schedule(
                self.plan,
                self.options.seed,
                lost.slot,
                self.start_s,
                replay=self.replay,
                stage_ends_s=self.stage_ends_s,
                stop_s=self.stop_s,
            )
            schedule = with_open(schedule, self.open_requests.get(lost.worker, []))
            mine = lost_rows(lost, schedule, self.recorded_ids.get(lost.worker, set()))
            self.lost_counts[lost.worker] = len(mine)
            rows.extend(mine)
        return rows

    def write_lost(self) -> None:
        """`.work/lost_workers.json`: each lost worker's slot, when it was lost, its lost rows."""
        self.write_json(
            LOST_FILE,
            {
                w: {
                    "slot": lost.slot.index + 1,
                    "of": lost.slot.count,
                    "lost_at_s": lost.lost_at_s,
                    "lost_requests": self.lost_counts.get(w),
                }
                for w, lost in self.lost_workers.items()
            },
        )

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        write_atomic(self.work / name, json.dumps(data))

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
