"""The run directory of a plain `locust -f locustfiles/llm.py` run: run.json first, the rest last.

`capplan loadtest` writes run.json and stages.json itself (it passes --llm-managed). A run
started with Locust directly leaves the same files through `start_run` and `finish_run`
(called by locustfiles/llm.py with its RunState):
records.parquet and server_metrics.parquet consolidated from their parts, stages.json from
`summarize_plan`, run.json with its end, so `capplan limit -o DIR` (which appends levels),
`capplan plan` and `capplan report` read it as they read capplan's own.
"""

from __future__ import annotations

import logging
import shutil
from typing import Any

from locust.env import Environment
from locust.runners import MasterRunner

from contracts.run import RunInfo, StageSummary
from contracts.rundir import (
    WORK_DIR,
    consolidate_run,
    new_run_info,
    now_iso,
    read_records,
    read_server_metrics,
    write_run_info,
    write_stages,
)
from locustfiles.runstate import RunState
from locustfiles.summary import summarize_plan

log = logging.getLogger("capplan.locust")


def start_run(run: RunState, env: Environment) -> RunInfo:
    """Write run.json for a plain run about to start (run.clock set); returns it."""
    o: Any = env.parsed_options
    assert run.clock is not None
    info = new_run_info(
        run.out,
        host=env.host or "",
        model=run.options.model,
        endpoint=run.options.endpoint,
        profile_source=o.llm_profile or "preset:chat",
        profile_digest=run.profile.digest(),
        seed=run.options.seed,
        plan=run.locust_plan.plan,
        workers=run.slot.count if isinstance(env.runner, MasterRunner) else 0,
        client_concurrency_cap=run.options.max_concurrency,
        ignore_eos=run.options.ignore_eos,
        start_epoch_s=run.clock.start_epoch_s,
        run_time_cap_s=run.locust_plan.run_time_cap_s,
    )
    run.out.mkdir(parents=True, exist_ok=True)
    write_run_info(run.out, info)
    log.info("capplan run directory: %s", run.out.resolve())
    return info


def finish_run(run: RunState, info: RunInfo) -> list[StageSummary]:
    """Consolidate the parts, write stages.json and the run's end; returns the summaries.

    A run stopped early (`run.stop_s`, run clock) leaves out the stages not begun by then,
    and the one running then ends there. A stage that -t cut short carries its planned length.
    """
    out, plan = run.out, run.locust_plan
    if run.lost_workers:
        info = info.model_copy(update={"lost_workers": run.lost_reports()})
    plan_end_s = run.start_s + sum(s.duration_s for s in run.plan.stages)
    early = run.stop_s is not None and run.stop_s < plan_end_s
    consolidate_run(out)
    summaries = summarize_plan(
        read_records(out),
        info.plan,
        run.start_s,
        server=read_server_metrics(out),
        stop_s=run.stop_s,
        stage_ends_s=run.stage_ends_s,
        prefix=run.profile.prefix,
    )
    summaries = [
        s.model_copy(update={"planned_duration_s": plan.planned_s.get(s.name)}) for s in summaries
    ]
    write_stages(out, summaries)
    info = info.model_copy(
        update={
            "ended_at": now_iso(),
            "interrupted": early and not plan.until_stopped,
            "tokens_estimated": any(s.tokens_estimated for s in summaries),
        }
    )
    write_run_info(out, info)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)
    log.info(
        "capplan: wrote %s (run.json, records.parquet, stages.json): %d requests in %s",
        out.resolve(),
        run.total_rows,
        ", ".join(f"{s.name} {s.duration_s:.1f} s" for s in summaries) or "no stage",
    )
    return summaries
