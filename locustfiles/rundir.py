"""The run directory of a plain `locust -f locustfiles/llm.py` run: run.json first, the rest last.

`capplan loadtest` writes run.json and stages.json itself (it passes --llm-managed). A run
started with Locust directly leaves the same files through `start_run` and `finish_run`:
records.parquet and server_metrics.parquet consolidated from their parts, stages.json from
`summarize_plan`, run.json with its end, so `capplan limit -o DIR` (which appends levels),
`capplan plan` and `capplan report` read it as they read capplan's own.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from importlib import metadata
from pathlib import Path

from contracts.run import RunInfo, StageSummary
from contracts.rundir import (
    WORK_DIR,
    consolidate_run,
    read_records,
    read_server_metrics,
    write_run_info,
    write_stages,
)
from locustfiles.stages import LocustPlan
from locustfiles.summary import summarize_plan
from profiles.model import Prefix


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def start_run(
    out: Path,
    locust_plan: LocustPlan,
    *,
    host: str,
    model: str,
    endpoint: str,
    profile_source: str,
    profile_digest: str,
    seed: int,
    workers: int,
    max_concurrency: int | None,
    ignore_eos: bool,
    start_epoch_s: float,
) -> RunInfo:
    """Write `out/run.json` for a run about to start; returns it."""
    info = RunInfo.model_validate(
        {
            "name": out.name,
            "command": list(sys.argv),
            "capplan_version": dist_version("llm-capacity-planner"),
            "locust_version": dist_version("locust"),
            "host": host,
            "model": model,
            "endpoint": endpoint,
            "profile_source": profile_source,
            "profile_digest": profile_digest,
            "seed": seed,
            "plan": locust_plan.plan,
            "workers": workers,
            "client_concurrency_cap": max_concurrency,
            "ignore_eos": ignore_eos,
            "started_at": now_iso(),
            "start_epoch_s": start_epoch_s,
            "run_time_cap_s": locust_plan.run_time_cap_s,
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    write_run_info(out, info)
    return info


def finish_run(
    out: Path,
    info: RunInfo,
    locust_plan: LocustPlan,
    plan_start_s: float,
    *,
    stop_s: float | None = None,
    interrupted: bool = False,
    stage_ends_s: dict[str, float] | None = None,
    prefix: Prefix | None = None,
) -> list[StageSummary]:
    """Consolidate the parts, write stages.json and the run's end; returns the summaries.

    `stop_s` (run clock): the run was stopped then, so later stages are left out and the
    one running then ends there. A stage that -t cut short carries its planned length.
    """
    consolidate_run(out)
    summaries = summarize_plan(
        read_records(out),
        info.plan,
        plan_start_s,
        server=read_server_metrics(out),
        stop_s=stop_s,
        stage_ends_s=stage_ends_s,
        prefix=prefix,
    )
    summaries = [
        s.model_copy(update={"planned_duration_s": locust_plan.planned_s.get(s.name)})
        for s in summaries
    ]
    write_stages(out, summaries)
    info = info.model_copy(
        update={
            "ended_at": now_iso(),
            "interrupted": interrupted,
            "tokens_estimated": any(s.tokens_estimated for s in summaries),
        }
    )
    write_run_info(out, info)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)
    return summaries
