"""Profile-driven load tests: run Locust headless on a stage plan and summarize each stage.

`run_loadtest` launches `locust -f locustfiles/llm.py` (one process, or a master with N
local workers) against an OpenAI-compatible target, shows live progress, and leaves a run
directory: `run.json`, `records.parquet` (one row per scheduled request, RECORD_COLUMNS),
`stages.json` (one StageSummary per stage) and `server_metrics.parquet`. With `append=True`
each call adds its stages to the same run directory (the limit search runs one level per
call). `summarize_stage` is the pure part: records in, a StageSummary out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

import locustfiles
from contracts.errors import ConfigError, InputError, RunError
from contracts.recovery import RECOVERY_WINDOW_S, recovery_curve
from contracts.run import (
    RECORD_COLUMNS,
    SERVER_METRIC_COLUMNS,
    RunInfo,
    StagePlan,
    StageSummary,
)
from locustfiles.metrics import MetricsScraper
from locustfiles.recorder import (
    METRICS_FILE,
    METRICS_PARTS,
    RECORDS_FILE,
    RECORDS_PARTS,
    consolidate,
    read_metrics_table,
    read_records_table,
)
from locustfiles.replay import read_log_table, slice_log
from locustfiles.rundir import dist_version as _version
from locustfiles.rundir import now_iso as _now_iso
from locustfiles.rundir import write_atomic as _write_json
from locustfiles.stages import builtin_plan, load_plan, resolve_plan, validate_plan
from locustfiles.summary import (
    RECOVERY_FACTOR,
    column_values,
    percentiles,
    summarize_plan,
    summarize_stage,
)
from planner.netutil import free_port
from planner.remote import master_args, note_lost, read_lost
from profiles.model import Profile, load_profile
from profiles.presets import preset_profile

__all__ = [
    "LoadTestConfig",
    "builtin_plan",
    "load_plan",
    "resolve_plan",
    "run_loadtest",
    "read_records",
    "read_server_metrics",
    "read_stages",
    "read_run_info",
    "summarize_stage",
    "summarize_plan",
    "percentiles",
    "LOCUSTFILE",
]

LOCUSTFILE = Path(locustfiles.__file__).parent / "llm.py"
WORK_DIR = ".work"


class LoadTestConfig(BaseModel):
    """What to load-test and how; validated once at the edge."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(description="base URL of the OpenAI-compatible target")
    model: str = Field(description="model name sent in each request")
    endpoint: Literal["chat", "completions"] = "chat"
    profile_path: str | None = Field(
        default=None, description="profile JSON; None: the chat preset"
    )
    api_key_env: str | None = Field(
        default=None, description="env var holding the API key (never written)"
    )
    seed: int = 0
    workers: int = Field(
        default=0, ge=0, description="0: one process; N: N local workers and a master"
    )
    ignore_eos: bool = True
    request_timeout_s: float = Field(default=300.0, gt=0)
    max_concurrency: int | None = Field(
        default=None, gt=0, description="optional client cap on in-flight requests"
    )
    scrape_metrics: bool = True
    slo_ttft_s: float | None = Field(
        default=None, gt=0, description="recovery threshold when given"
    )
    replay_path: str | None = None
    replay_speed: float = Field(default=1.0, gt=0)
    replay_start_s: float = Field(
        default=0.0, ge=0, description="log second where the replay starts"
    )
    drain_s: float = Field(
        default=30.0, ge=0, description="wait for in-flight requests after the last stage"
    )
    master_bind: str | None = Field(
        default=None,
        description="HOST:PORT: run the master alone there; workers join from other hosts",
    )
    expect_workers: int = Field(
        default=0, ge=0, description="with master_bind: start once this many workers joined"
    )
    workers_wait_s: float = Field(
        default=600.0, gt=0, description="with master_bind: longest wait for the workers"
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="the endpoint's clock runs this many times faster than wall time (an "
        "emulator at --speed S); plans, schedules and records are in the endpoint's time",
    )


# --- reading a run directory ---------------------------------------------------------------


def read_records(run_dir: Path) -> pl.DataFrame:
    """Every row written so far (consolidated file plus unmerged parts), RECORD_COLUMNS."""
    return read_records_table(Path(run_dir))


def read_server_metrics(run_dir: Path) -> pl.DataFrame:
    """Scraped Prometheus samples (t_s, name, labels, type, value)."""
    return read_metrics_table(Path(run_dir))


def read_stages(run_dir: Path) -> list[StageSummary]:
    """stages.json as StageSummary objects ([] when there is none yet)."""
    path = Path(run_dir) / "stages.json"
    if not path.exists():
        return []
    return [StageSummary.model_validate(s) for s in json.loads(path.read_text())]


def read_run_info(run_dir: Path) -> RunInfo:
    path = Path(run_dir) / "run.json"
    if not path.exists():
        raise InputError(f"{path}: no run.json (not a capplan run directory)")
    return RunInfo.model_validate_json(path.read_text())


# --- running ---------------------------------------------------------------------------------


def config_profile(config: LoadTestConfig) -> tuple[Profile, str]:
    """The profile to draw requests from and how run.json names it (path or preset:chat)."""
    if config.profile_path:
        return load_profile(config.profile_path), config.profile_path
    return preset_profile("chat"), "preset:chat"


def _locust_args(config: LoadTestConfig, out_dir: Path, epoch: float, work: Path) -> list[str]:
    args = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--host",
        config.host,
        "--llm-profile",
        str(work / "profile.json"),
        "--llm-plan",
        str(work / "plan.json"),
        "--llm-model",
        config.model,
        "--llm-endpoint",
        config.endpoint,
        "--llm-seed",
        str(config.seed),
        "--llm-out",
        str(out_dir),
        "--llm-run-epoch",
        repr(epoch),
        "--llm-request-timeout",
        repr(config.request_timeout_s),
        "--llm-drain",
        repr(config.drain_s),
        "--llm-speed",
        repr(config.replay_speed),
        "--llm-time-scale",
        repr(config.time_scale),
        "--loglevel",
        "WARNING",
        "--only-summary",  # no stats table every 2 s: it would run in the dispatcher's process
        "--exit-code-on-error",
        "0",
        "--llm-managed",  # this process writes run.json and stages.json
    ]
    if config.api_key_env:
        args += ["--llm-api-key-env", config.api_key_env]
    if not config.ignore_eos:
        args.append("--llm-no-ignore-eos")
    if config.max_concurrency:
        args += ["--llm-max-concurrency", str(config.max_concurrency)]
    args.append("--llm-no-metrics")  # capplan scrapes from its own process (MetricsScraper)
    if config.replay_path:
        args += [
            "--llm-replay",
            str(work / "replay.parquet"),
            "--llm-replay-start",
            repr(config.replay_start_s),
        ]
    return args


def _format_progress(live: dict[str, Any], offered_rps: float | None) -> str:
    p95 = live.get("ttft_p95_s")
    return (
        f"{live.get('stage', '')}  t={live.get('elapsed_s', 0.0):6.1f}s  "
        f"offered {offered_rps if offered_rps is not None else 0.0:7.2f} req/s  "
        f"achieved {live.get('achieved_rps', 0.0):7.2f} req/s  "
        f"in flight {live.get('in_flight', 0):4d}  "
        f"p95 TTFT {'   -   ' if p95 is None else f'{p95:7.3f}s'}  "
        f"errors {live.get('errors', 0)}"
    )


def _prepare_run_info(
    config: LoadTestConfig,
    plan: StagePlan,
    out_dir: Path,
    append: bool,
    profile: Profile,
    source: str,
) -> RunInfo:
    run_json = out_dir / "run.json"
    if append and run_json.exists():
        info = read_run_info(out_dir)
        taken = {s.name for s in info.plan.stages}
        clash = [s.name for s in plan.stages if s.name in taken]
        if clash:
            raise ConfigError(
                f"{out_dir}: stage names {clash} already exist in this run (names must be unique)"
            )
        info.plan = StagePlan(name=info.plan.name, stages=[*info.plan.stages, *plan.stages])
        info.ended_at = None
        return info
    if not append and (run_json.exists() or (out_dir / RECORDS_FILE).exists()):
        raise ConfigError(
            f"{out_dir}: already holds a run; choose another output folder or remove it"
        )
    return RunInfo(
        name=out_dir.name,
        command=list(sys.argv),
        capplan_version=_version("llm-capacity-planner"),
        locust_version=_version("locust"),
        host=config.host,
        model=config.model,
        endpoint=config.endpoint,
        profile_source=source,
        profile_digest=profile.digest(),
        seed=config.seed,
        plan=plan,
        workers=config.expect_workers if config.master_bind else config.workers,
        master_bind=config.master_bind,
        client_concurrency_cap=config.max_concurrency,
        ignore_eos=config.ignore_eos,
        time_scale=config.time_scale,
        started_at=_now_iso(),
        start_epoch_s=time.time(),
    )


def run_loadtest(
    config: LoadTestConfig,
    plan: StagePlan,
    out_dir: Path,
    *,
    append: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[StageSummary]:
    """Run `plan` against `config.host` with Locust and write the run directory `out_dir`.

    Returns the summaries of this call's stages. With `append`, adds the stages to an
    existing run (names must be new). On Ctrl-C the run stops gracefully, everything measured
    so far is written (run.json marked interrupted) and KeyboardInterrupt is re-raised.
    Raises ConfigError/InputError for bad input, RunError when Locust fails to run.
    """
    out_dir = Path(out_dir)
    validate_plan(plan)
    if any(s.arrival == "replay" for s in plan.stages) and not config.replay_path:
        raise ConfigError("the plan has replay stages but no replay log was given (--replay LOG)")
    if config.api_key_env and not os.environ.get(config.api_key_env):
        raise ConfigError(
            f"--api-key-env {config.api_key_env}: that environment variable is not set or empty"
        )
    remote = None
    if config.master_bind:
        if config.workers:
            raise ConfigError("--master-bind runs remote workers only: drop --workers")
        remote = master_args(config.master_bind, config.expect_workers, config.workers_wait_s)
    profile, source = config_profile(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = _prepare_run_info(config, plan, out_dir, append, profile, source)
    work = out_dir / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "profile.json").write_text(profile.to_json())
    (work / "plan.json").write_text(plan.model_dump_json())
    if config.replay_path:
        span = sum(s.duration_s for s in plan.stages if s.arrival == "replay") * config.replay_speed
        table = slice_log(read_log_table(config.replay_path), config.replay_start_s, span + 1.0)
        table.write_parquet(work / "replay.parquet")
    _write_json(out_dir / "run.json", info.model_dump_json(by_alias=True, indent=2))
    assert info.start_epoch_s is not None
    args = _locust_args(config, out_dir, info.start_epoch_s, work)
    recovery = _RecoveryWatcher.for_plan(plan, out_dir, config.slo_ttft_s)
    if recovery is not None:
        recovery.then = progress
        progress = recovery
    scraper: MetricsScraper | None = None
    if config.scrape_metrics:
        epoch = info.start_epoch_s
        scale = config.time_scale
        scraper = MetricsScraper(config.host, out_dir, lambda: (time.time() - epoch) * scale)
        scraper.start()
    try:
        interrupted, returncode = _run_locust(
            args, config.workers, out_dir, work, plan, progress, remote, config.workers_wait_s
        )
    finally:
        if scraper is not None:
            scraper.stop()
    start_file = work / "start.json"
    if not start_file.exists():
        if interrupted:
            raise KeyboardInterrupt
        tail = _log_tail(out_dir / "locust.log")
        raise RunError(
            f"Locust did not start the run; last lines of {out_dir / 'locust.log'}:\n{tail}"
        )
    plan_start_s = float(json.loads(start_file.read_text())["plan_start_s"])
    consolidate(out_dir, RECORDS_FILE, RECORDS_PARTS, RECORD_COLUMNS)
    consolidate(out_dir, METRICS_FILE, METRICS_PARTS, SERVER_METRIC_COLUMNS)
    previous = read_stages(out_dir) if append else []
    records = read_records(out_dir)
    stop_s = None
    if interrupted and records.height:
        stop_s = float(records["end_s"].max())  # type: ignore[arg-type]
    ends_file = work / "stage_ends.json"
    stage_ends_s = json.loads(ends_file.read_text()) if ends_file.exists() else {}
    summaries = summarize_plan(
        records,
        plan,
        plan_start_s,
        server=read_server_metrics(out_dir),
        slo_ttft_s=config.slo_ttft_s,
        previous=previous,
        stop_s=stop_s,
        stage_ends_s=stage_ends_s,
        prefix=profile.prefix,
    )
    lost = read_lost(work)
    summaries = note_lost(summaries, lost)
    all_stages = [*previous, *summaries]
    _write_json(out_dir / "stages.json", json.dumps([s.model_dump() for s in all_stages], indent=2))
    info.ended_at = _now_iso()
    info.interrupted = info.interrupted or interrupted
    info.lost_workers = [*info.lost_workers, *lost]
    info.tokens_estimated = info.tokens_estimated or any(s.tokens_estimated for s in summaries)
    _write_json(out_dir / "run.json", info.model_dump_json(by_alias=True, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    if interrupted:
        raise KeyboardInterrupt
    if returncode != 0:
        raise RunError(
            f"Locust exited with code {returncode} (rows so far are in {out_dir}); "
            f"last lines of its log:\n{_log_tail(out_dir / 'locust.log')}"
        )
    return summaries


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _run_locust(
    args: list[str],
    workers: int,
    out_dir: Path,
    work: Path,
    plan: StagePlan,
    progress: Callable[[str], None] | None,
    remote: list[str] | None = None,
    wait_s: float = 0.0,
) -> tuple[bool, int]:
    """Run Locust until it exits; returns (interrupted by Ctrl-C, the master's exit code).

    `remote`: the master's options (planner.remote.master_args); it runs alone and waits up
    to `wait_s` for workers started on other hosts."""
    log_file = open(out_dir / "locust.log", "ab")  # noqa: SIM115 - closed in finally
    procs: list[subprocess.Popen[bytes]] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    plan_s = sum(s.duration_s for s in plan.stages)
    interrupted = False
    try:
        if remote is not None:
            procs.append(
                subprocess.Popen(
                    args + ["--headless", *remote],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
            if progress is not None:
                progress(f"waiting for {remote[-3]} workers on {remote[2]}:{remote[4]} ...")
        elif workers > 0:
            port = free_port()
            master = args + [
                "--headless",
                "--master",
                "--expect-workers",
                str(workers),
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                str(port),
            ]
            procs.append(
                subprocess.Popen(
                    master,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
            for _ in range(workers):
                worker = args + [
                    "--worker",
                    "--master-host",
                    "127.0.0.1",
                    "--master-port",
                    str(port),
                ]
                procs.append(
                    subprocess.Popen(
                        worker,
                        stdout=log_file,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        else:
            procs.append(
                subprocess.Popen(
                    args + ["--headless"],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        master_proc = procs[0]
        reporter = _Progress(work, progress)
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
            (work / "stop").touch()
            with contextlib.suppress(subprocess.TimeoutExpired):
                master_proc.wait(timeout=20)
        for p in procs[1:]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        log_file.close()
    return interrupted, 0 if interrupted else int(procs[0].returncode or 0)


class _RecoveryWatcher:
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
    ) -> _RecoveryWatcher | None:
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
        work = self.out_dir / WORK_DIR
        try:
            live = json.loads((work / "live.json").read_text())
            plan_start_s = float(json.loads((work / "start.json").read_text())["plan_start_s"])
        except (OSError, ValueError, KeyError):
            return
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
            (work / "end-stage").write_text(recovery.name)


class _Progress:
    """Turns `.work/live.json` into one progress line; offered rate over the last 5 s."""

    WINDOW_S = 5.0

    def __init__(self, work: Path, progress: Callable[[str], None] | None) -> None:
        self._work = work
        self._progress = progress
        self._history: deque[tuple[float, int]] = deque()

    def update(self) -> None:
        if self._progress is None:
            return
        try:
            live = json.loads((self._work / "live.json").read_text())
        except (OSError, ValueError):
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
        self._progress(_format_progress(live, offered))
