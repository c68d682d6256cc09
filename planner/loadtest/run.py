"""Profile-driven load tests: run Locust headless on a stage plan and summarize each stage.

`run_loadtest` launches `locust -f locustfiles/llm.py` (one process, or a master with N
local workers) against an OpenAI-compatible target, shows live progress, and leaves a run
directory: `run.json`, `records.parquet` (one row per scheduled request, RECORD_COLUMNS),
`stages.json` (one StageSummary per stage) and `server_metrics.parquet`. With `append=True`
each call adds its stages to the same run directory (the limit search runs one level per
call). `summarize_stage` is the pure part: records in, a StageSummary out.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import ConfigError, RunError
from contracts.jsonio import write_atomic
from contracts.run import RunInfo, StagePlan, StageSummary
from contracts.rundir import (
    DRIVER_ERROR_FILE,
    LOG_FILE,
    RUN_FILE,
    STAGE_ENDS_FILE,
    STAGE_PLAN_FILE,
    START_FILE,
    STOPPED_FILE,
    WORK_DIR,
    WORK_PROFILE_FILE,
    consolidate_run,
    holds_run,
    new_run_info,
    read_records,
    read_run_info,
    read_server_metrics,
    read_stages,
    read_work_json,
    write_run_info,
    write_stages,
)
from contracts.rundir import now_iso as _now_iso
from locustfiles.metrics import MetricsScraper
from locustfiles.replay import read_log_table, slice_log
from locustfiles.stages import validate_plan
from locustfiles.summary import summarize_plan
from planner.loadtest.processes import RecoveryWatcher, log_tail, run_locust
from planner.loadtest.remote import locust_command, master_args, note_lost, read_lost
from planner.slo.spec import Slo
from planner.slo.verdict import evaluate
from profiles.model import Profile, load_profile
from profiles.presets import preset_profile

__all__ = ["LoadTestConfig", "run_loadtest"]


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
    slo: Slo | None = Field(
        default=None,
        description="the SLO (parsed at the edge, success_only included): each stage of "
        "stages.json gets its goodput and attainment under it",
    )
    profile_label: str | None = Field(
        default=None,
        description="how run.json names a profile made in memory (e.g. random: 512 in / "
        "128 out tokens); None: the path or preset:chat",
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
        "emulator at --time-scale S); plans, schedules and records are in the endpoint's time",
    )


# --- running ---------------------------------------------------------------------------------


def judge_stages(
    records: pl.DataFrame, summaries: list[StageSummary], slo: Slo
) -> list[StageSummary]:
    """`summaries` with each stage's goodput and attainment under `slo`, from its records
    (planner.slo.verdict.evaluate over the whole stage: every scheduled request counts)."""
    out = []
    for summary in summaries:
        rows = records.filter(pl.col("stage") == summary.name)
        verdict = evaluate(rows, slo, duration_s=summary.duration_s, start_s=summary.start_s)
        update = {
            "slo": slo.text,
            "success_only": slo.success_only,
            "goodput_rps": verdict.goodput_rps,
        }
        out.append(summary.model_copy(update={**update, "attainment": verdict.attainment}))
    return out


def check_out_dir(out_dir: Path) -> None:
    """Raise ConfigError when `out_dir`, the run folder to write, is an existing file."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"-o {out_dir}: a file exists there; expected a folder for the run")


def config_profile(config: LoadTestConfig, loaded: Profile | None = None) -> tuple[Profile, str]:
    """The profile to draw requests from (`loaded` when the caller holds it already) and how
    run.json names it (path or preset:chat)."""
    source = config.profile_label or config.profile_path or "preset:chat"
    if loaded is not None:
        return loaded, source
    if config.profile_path:
        return load_profile(config.profile_path), source
    return preset_profile("chat"), source


def _locust_args(config: LoadTestConfig, out_dir: Path, epoch: float, work: Path) -> list[str]:
    args = locust_command(
        "--host",
        config.host,
        "--llm-profile",
        str(work / WORK_PROFILE_FILE),
        "--llm-plan",
        str(work / STAGE_PLAN_FILE),
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
    )
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


def _prepare_run_info(
    config: LoadTestConfig,
    plan: StagePlan,
    out_dir: Path,
    append: bool,
    profile: Profile,
    source: str,
) -> RunInfo:
    run_json = out_dir / RUN_FILE
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
    if not append and holds_run(out_dir):
        raise ConfigError(
            f"{out_dir}: already holds a run; choose another output folder or remove it"
        )
    return new_run_info(
        out_dir,
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
        start_epoch_s=time.time(),
    )


def run_loadtest(
    config: LoadTestConfig,
    plan: StagePlan,
    out_dir: Path,
    *,
    append: bool = False,
    progress: Callable[[str], None] | None = None,
    check_target: Callable[[LoadTestConfig], str] | None = None,
    profile: Profile | None = None,
    on_stage: Callable[[int], None] | None = None,
) -> list[StageSummary]:
    """Run `plan` against `config.host` with Locust and write the run directory `out_dir`.

    Returns the summaries of this call's stages. With `append`, adds the stages to an
    existing run (names must be new). `check_target`, once the inputs are valid and before
    anything is written, checks the endpoint and returns the model to send
    (planner.loadtest.preflight.checked_model; its errors propagate). On Ctrl-C (or SIGTERM, which
    the CLI raises as KeyboardInterrupt) the run stops gracefully, everything measured so far
    is written (run.json marked interrupted) and KeyboardInterrupt is re-raised. `on_stage`
    hears the index of each stage of `plan` as the run enters it.
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
    slo = config.slo
    profile, source = config_profile(config, profile)
    check_out_dir(out_dir)
    if check_target is not None:
        config = config.model_copy(update={"model": check_target(config)})
    out_dir.mkdir(parents=True, exist_ok=True)
    info = _prepare_run_info(config, plan, out_dir, append, profile, source)
    work = out_dir / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_atomic(work / WORK_PROFILE_FILE, profile.to_json())
    write_atomic(work / STAGE_PLAN_FILE, plan.model_dump_json())
    if config.replay_path:
        span = sum(s.duration_s for s in plan.stages if s.arrival == "replay") * config.replay_speed
        table = slice_log(read_log_table(config.replay_path), config.replay_start_s, span + 1.0)
        table.write_parquet(work / "replay.parquet")
    write_run_info(out_dir, info)
    assert info.start_epoch_s is not None
    args = _locust_args(config, out_dir, info.start_epoch_s, work)
    recovery = RecoveryWatcher.for_plan(plan, out_dir, config.slo_ttft_s)
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
        interrupted, returncode = run_locust(
            args,
            config.workers,
            out_dir,
            work,
            plan,
            progress,
            remote,
            config.workers_wait_s,
            on_stage=on_stage,
        )
    finally:
        if scraper is not None:
            scraper.stop()
    start = read_work_json(out_dir, START_FILE)
    if not isinstance(start, dict):
        if interrupted:
            raise KeyboardInterrupt
        tail = log_tail(out_dir / LOG_FILE)
        raise RunError(f"Locust did not start the run; last lines of {out_dir / LOG_FILE}:\n{tail}")
    plan_start_s = float(start["plan_start_s"])
    consolidate_run(out_dir)
    previous = read_stages(out_dir) if append else []
    records = read_records(out_dir)
    stop_s = None
    stopped = read_work_json(out_dir, STOPPED_FILE)  # a run stopped early: Ctrl-C, a stop file
    if isinstance(stopped, dict) and isinstance(stopped.get("stop_s"), (int, float)):
        stop_s = float(stopped["stop_s"])
    elif interrupted and records.height:
        stop_s = float(records["end_s"].max())  # type: ignore[arg-type]
    stage_ends_s = read_work_json(out_dir, STAGE_ENDS_FILE) or {}
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
    if slo is not None:
        summaries = judge_stages(records, summaries, slo)
    all_stages = [*previous, *summaries]
    write_stages(out_dir, all_stages)
    info.ended_at = _now_iso()
    info.interrupted = info.interrupted or interrupted
    info.lost_workers = [*info.lost_workers, *lost]
    info.tokens_estimated = info.tokens_estimated or any(s.tokens_estimated for s in summaries)
    write_run_info(out_dir, info)
    failed = read_work_json(out_dir, DRIVER_ERROR_FILE)
    shutil.rmtree(work, ignore_errors=True)
    if interrupted:
        raise KeyboardInterrupt
    if isinstance(failed, dict):
        raise RunError(
            f"the load generator failed: {failed.get('error')}; the rows it wrote are in "
            f"{out_dir}; last lines of its log:\n{log_tail(out_dir / LOG_FILE)}"
        )
    if returncode != 0:
        raise RunError(
            f"Locust exited with code {returncode} (rows so far are in {out_dir}); "
            f"last lines of its log:\n{log_tail(out_dir / LOG_FILE)}"
        )
    return summaries
