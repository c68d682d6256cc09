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
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

import locustfiles
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
from locustfiles.stages import builtin_plan, load_plan, resolve_plan, validate_plan
from planner.errors import ConfigError, InputError, RunError
from planner.run_schema import (
    RECORD_COLUMNS,
    SERVER_METRIC_COLUMNS,
    Percentiles,
    RunInfo,
    Stage,
    StagePlan,
    StageSummary,
)
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
    "percentiles",
    "LOCUSTFILE",
]

LOCUSTFILE = Path(locustfiles.__file__).parent / "llm.py"
WORK_DIR = ".work"
RECOVERY_WINDOW_S = 10.0
RECOVERY_STEP_S = 0.5
RECOVERY_FACTOR = 1.2
_MIN_WINDOW_SAMPLES = 3


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


# --- statistics (pure) ---------------------------------------------------------------------


def percentiles(values: Any) -> Percentiles:
    """count, mean, p50/p90/p95/p99 and max of the non-null values (seconds)."""
    arr = (
        np.asarray([v for v in values if v is not None], dtype=float)
        if not isinstance(values, np.ndarray)
        else values
    )
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return Percentiles()
    p50, p90, p95, p99 = np.percentile(arr, [50, 90, 95, 99])
    return Percentiles(
        count=int(arr.size),
        mean=float(arr.mean()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        max=float(arr.max()),
    )


def _col(df: pl.DataFrame, expr: pl.Expr) -> np.ndarray:
    return df.select(expr.cast(pl.Float64)).to_series().drop_nulls().to_numpy()


def _mean_in_flight(records: pl.DataFrame, start_s: float, end_s: float) -> float:
    sent = records.filter(pl.col("sent_s").is_not_null())
    if sent.height == 0 or end_s <= start_s:
        return 0.0
    lo = pl.max_horizontal(pl.col("sent_s"), pl.lit(start_s))
    hi = pl.min_horizontal(pl.col("end_s").fill_null(end_s), pl.lit(end_s))
    busy = sent.select((hi - lo).clip(lower_bound=0.0).sum()).item()
    return float(busy) / (end_s - start_s)


def recovery_time_s(
    stage_rows: pl.DataFrame, burst_end_s: float, end_s: float, threshold_s: float
) -> float | None:
    """Seconds from the burst's end until the rolling 10 s p95 TTFT is back under `threshold_s`.

    The window at time t holds the requests sent in [t - 10 s, t]; TTFT is measured from the
    intended send, and a failed request counts as infinitely slow. None if it never recovers
    before `end_s`.
    """
    df = stage_rows.select(
        pl.col("intended_send_s").alias("t"),
        pl.when(pl.col("ok"))
        .then(pl.col("first_token_s") - pl.col("intended_send_s"))
        .otherwise(float("inf"))
        .alias("ttft"),
    ).sort("t")
    t_arr = df["t"].to_numpy()
    v_arr = df["ttft"].fill_null(float("inf")).to_numpy()
    t = burst_end_s
    while t <= end_s + 1e-9:
        lo, hi = np.searchsorted(t_arr, [t - RECOVERY_WINDOW_S, t], side="right")
        window = v_arr[lo:hi]
        if window.size >= _MIN_WINDOW_SAMPLES:
            with np.errstate(invalid="ignore"):  # inf - inf between failed requests: nan
                p95 = np.percentile(window, 95)
            if p95 <= threshold_s:
                return max(0.0, t - burst_end_s)
        t += RECOVERY_STEP_S
    return None


def _server_summary(server: pl.DataFrame, start_s: float, end_s: float) -> dict[str, float]:
    window = server.filter((pl.col("t_s") >= start_s) & (pl.col("t_s") <= end_s))
    out: dict[str, float] = {}
    if window.height == 0:
        return out
    gauges = (
        window.filter(pl.col("type") == "gauge").group_by("name", "t_s").agg(pl.col("value").sum())
    )
    for name, grp in gauges.group_by("name"):
        values = grp["value"]
        out[f"{name[0]}:mean"] = float(values.mean())  # type: ignore[arg-type]
        out[f"{name[0]}:max"] = float(values.max())  # type: ignore[arg-type]
    counters = (
        window.filter(pl.col("type") == "counter")
        .group_by("name", "t_s")
        .agg(pl.col("value").sum())
    )
    for name, grp in counters.group_by("name"):
        grp = grp.sort("t_s")
        span = float(grp["t_s"][-1] - grp["t_s"][0])
        if span > 0:
            out[f"{name[0]}:rate_per_s"] = float(grp["value"][-1] - grp["value"][0]) / span
    return dict(sorted(out.items()))


def _error_messages(errors: pl.DataFrame) -> dict[str, str]:
    """Per error class, its most frequent message (ties: the first in sort order)."""
    if "error_message" not in errors.columns:
        return {}
    counts = (
        errors.drop_nulls(["error_class", "error_message"])
        .group_by("error_class", "error_message")
        .len()
        .sort(["error_class", "len", "error_message"], descending=[False, True, False])
    )
    first = counts.unique("error_class", keep="first", maintain_order=True)
    return {str(c): str(m) for c, m in first.select("error_class", "error_message").iter_rows()}


def summarize_stage(
    records: pl.DataFrame,
    stage: Stage,
    start_s: float,
    end_s: float,
    *,
    server: pl.DataFrame | None = None,
    baseline_ttft_p95_s: float | None = None,
    slo_ttft_s: float | None = None,
    burst_end_s: float | None = None,
) -> StageSummary:
    """The StageSummary of `stage` from the run's records (seconds since run start).

    Rows belong to a stage by their `stage` column (the stage they were scheduled in). For a
    recovery stage with `burst_end_s` and a threshold (`slo_ttft_s`, else 1.2 x
    `baseline_ttft_p95_s`), also the recovery time.
    """
    rows = records.filter(pl.col("stage") == stage.name)
    ok = rows.filter(pl.col("ok"))
    duration = max(end_s - start_s, 1e-9)
    errors = rows.filter(~pl.col("ok"))
    by_class = errors.group_by("error_class").len().sort("error_class")
    errors_by_class = {str(c): int(n) for c, n in by_class.iter_rows()}
    error_messages = _error_messages(errors)
    out_tokens = ok["output_tokens"].fill_null(0).sum()
    if "itl_gaps_s" in ok.columns:
        gaps = ok.select(pl.col("itl_gaps_s").explode().drop_nulls()).to_series().to_numpy()
    else:  # a frame with only RECORD_COLUMNS: per-request mean gaps stand in for the pool
        gaps = _col(ok, pl.col("itl_mean_s"))
    recovery_s: float | None = None
    recovered: bool | None = None
    if stage.role == "recovery" and burst_end_s is not None:
        threshold = (
            slo_ttft_s
            if slo_ttft_s is not None
            else (
                RECOVERY_FACTOR * baseline_ttft_p95_s if baseline_ttft_p95_s is not None else None
            )
        )
        if threshold is not None:
            recovery_s = recovery_time_s(rows, burst_end_s, end_s, threshold)
            recovered = recovery_s is not None
    return StageSummary(
        name=stage.name,
        kind=stage.kind,
        role=stage.role,
        start_s=start_s,
        end_s=end_s,
        duration_s=duration,
        target_rate_rps=stage.rate_rps,
        target_users=stage.users,
        scheduled=rows.height,
        completed=ok.height,
        errors=errors.height,
        errors_by_class=errors_by_class,
        error_messages=error_messages,
        offered_rps=rows.height / duration,
        achieved_rps=ok.height / duration,
        output_tokens_per_s=float(out_tokens) / duration,
        ttft_s=percentiles(_col(ok, pl.col("ttft_s"))),
        tpot_s=percentiles(_col(ok, pl.col("tpot_s"))),
        itl_s=percentiles(gaps.astype(float)),
        e2e_s=percentiles(_col(ok, pl.col("e2e_s"))),
        schedule_lag_s=percentiles(_col(rows, pl.col("schedule_lag_s"))),
        ttft_from_intended_s=percentiles(
            _col(ok, pl.col("first_token_s") - pl.col("intended_send_s"))
        ),
        mean_in_flight=_mean_in_flight(records, start_s, end_s),
        tokens_estimated=bool(ok["tokens_estimated"].any()) if ok.height else False,
        recovery_s=recovery_s,
        recovered=recovered,
        server=_server_summary(server, start_s, end_s) if server is not None else {},
    )


def summarize_plan(
    records: pl.DataFrame,
    plan: StagePlan,
    plan_start_s: float,
    *,
    server: pl.DataFrame | None = None,
    slo_ttft_s: float | None = None,
    previous: list[StageSummary] | None = None,
    stop_s: float | None = None,
) -> list[StageSummary]:
    """Summaries of every stage of `plan`, started at `plan_start_s`; recovery stages are
    measured against the last steady stage and burst before them (in `previous` too).
    With `stop_s` (a run stopped early), stages not begun by then are left out and the one
    running then ends there."""
    history = list(previous or [])
    out: list[StageSummary] = []
    t = plan_start_s
    for stage in plan.stages:
        if stop_s is not None and t >= stop_s:
            break
        end_s = t + stage.duration_s if stop_s is None else min(t + stage.duration_s, stop_s)
        earlier = history + out
        steady = next((s for s in reversed(earlier) if s.role == "steady"), None)
        burst = next((s for s in reversed(earlier) if s.role == "burst"), None)
        out.append(
            summarize_stage(
                records,
                stage,
                t,
                end_s,
                server=server,
                baseline_ttft_p95_s=steady.ttft_from_intended_s.p95 if steady else None,
                slo_ttft_s=slo_ttft_s,
                burst_end_s=burst.end_s if burst else None,
            )
        )
        t += stage.duration_s
    return out


# --- running ---------------------------------------------------------------------------------


def config_profile(config: LoadTestConfig) -> tuple[Profile, str]:
    """The profile to draw requests from and how run.json names it (path or preset:chat)."""
    if config.profile_path:
        return load_profile(config.profile_path), config.profile_path
    return preset_profile("chat"), "preset:chat"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        "--loglevel",
        "WARNING",
        "--only-summary",  # no stats table every 2 s: it would run in the dispatcher's process
        "--exit-code-on-error",
        "0",
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


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


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
        workers=config.workers,
        client_concurrency_cap=config.max_concurrency,
        ignore_eos=config.ignore_eos,
        started_at=_now_iso(),
        start_epoch_s=time.time(),
    )


def _write_json(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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
    scraper: MetricsScraper | None = None
    if config.scrape_metrics:
        epoch = info.start_epoch_s
        scraper = MetricsScraper(config.host, out_dir, lambda: time.time() - epoch)
        scraper.start()
    try:
        interrupted, returncode = _run_locust(args, config.workers, out_dir, work, plan, progress)
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
    summaries = summarize_plan(
        records,
        plan,
        plan_start_s,
        server=read_server_metrics(out_dir),
        slo_ttft_s=config.slo_ttft_s,
        previous=previous,
        stop_s=stop_s,
    )
    all_stages = [*previous, *summaries]
    _write_json(out_dir / "stages.json", json.dumps([s.model_dump() for s in all_stages], indent=2))
    info.ended_at = _now_iso()
    info.interrupted = info.interrupted or interrupted
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
) -> tuple[bool, int]:
    """Run Locust until it exits; returns (interrupted by Ctrl-C, the master's exit code)."""
    log_file = open(out_dir / "locust.log", "ab")  # noqa: SIM115 - closed in finally
    procs: list[subprocess.Popen[bytes]] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    plan_s = sum(s.duration_s for s in plan.stages)
    interrupted = False
    try:
        if workers > 0:
            port = _free_port()
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
        deadline = time.monotonic() + plan_s + 600.0
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
