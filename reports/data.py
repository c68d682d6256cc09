"""Loading the finished results a report renders, plus the small per-second series its charts draw.

Everything the report states as a verdict, a limit or a plan number comes from the JSON files
written by the profiler, the load test, the limit search and the planner. The only numbers
made here are chart series over records.parquet and server_metrics.parquet (per-second counts,
a rolling p95), which the JSON files do not carry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import ValidationError

from contracts.errors import InputError
from contracts.jsonio import first_error, read_json, validate
from contracts.limit import LIMIT_SCHEMA, LimitResult
from contracts.plan import PLAN_SCHEMA, Plan
from contracts.run import RUN_SCHEMA, RunInfo, StageSummary
from profiles.model import Profile, load_profile

# server_metrics.parquet is long format: one row per scrape and sample (`name` or `metric`).
SERVER_METRIC_COLUMNS = ("t_s", "metric", "value")
QUEUE_METRIC = "vllm:num_requests_waiting"
RUNNING_METRIC = "vllm:num_requests_running"
KV_METRIC = "vllm:kv_cache_usage_perc"

ROLLING_WINDOW_S = 10.0


@dataclass(frozen=True)
class Series:
    """One x/y series for a chart (x in seconds since run start unless named otherwise)."""

    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Timeline:
    """Per-second series of a run, for the load-test timeline and the recovery chart."""

    offered_rps: Series
    achieved_rps: Series
    errors_per_s: Series
    ttft_p95_rolling_s: Series
    server: dict[str, Series]


@dataclass(frozen=True)
class InputDigest:
    """One input file the report rests on, with its sha256."""

    role: str
    path: str
    sha256: str


@dataclass(frozen=True)
class ReportInputs:
    """Everything one report renders, loaded and validated."""

    profile: Profile
    profile_path: Path
    run: RunInfo
    run_dir: Path
    stages: list[StageSummary]
    limit: LimitResult
    limit_path: Path
    plan: Plan
    plan_path: Path
    previous: Plan | None
    previous_path: Path | None
    timeline: Timeline | None
    digests: list[InputDigest]


def load_plan(path: Path) -> Plan:
    """Read plan.json; raises InputError naming the file and the first bad field."""
    return validate(Plan, read_json(path, "plan"), path, PLAN_SCHEMA)


def load_limit(path: Path) -> LimitResult:
    """Read limit.json; raises InputError naming the file and the first bad field."""
    return validate(LimitResult, read_json(path, "limit"), path, LIMIT_SCHEMA)


def load_run_info(run_dir: Path) -> RunInfo:
    """Read run_dir/run.json."""
    path = run_dir / "run.json"
    return validate(RunInfo, read_json(path, "run"), path, RUN_SCHEMA)


def load_stages(run_dir: Path) -> list[StageSummary]:
    """Read run_dir/stages.json: a list of stage summaries (or {"stages": [...]})."""
    path = run_dir / "stages.json"
    data = read_json(path, "stages")
    if isinstance(data, dict) and "stages" in data:
        data = data["stages"]
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a list of stage summaries")
    stages = []
    for i, item in enumerate(data):
        try:
            stages.append(StageSummary.model_validate(item))
        except ValidationError as err:
            raise InputError(f"{path}: stage {i}: {first_error(err)}") from err
    return stages


def load_records(run_dir: Path) -> pl.DataFrame | None:
    """Read run_dir/records.parquet (the columns the charts need), or None when absent."""
    path = run_dir / "records.parquet"
    if not path.exists():
        return None
    needed = ("stage", "intended_send_s", "end_s", "ttft_s", "ok")
    try:
        present = pl.read_parquet_schema(path)
        missing = [c for c in needed if c not in present]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)} (see RECORD_COLUMNS)")
        frame = pl.read_parquet(path, columns=list(needed))
    except InputError:
        raise
    except Exception as err:  # polars raises several unrelated types for bad files
        raise InputError(f"{path}: cannot read records ({err})") from err
    return frame


def load_server_metrics(run_dir: Path) -> pl.DataFrame | None:
    """Read run_dir/server_metrics.parquet as (t_s, metric, value), or None when absent.

    The load test writes one row per scraped Prometheus sample (t_s, name, labels, type,
    value); samples of one gauge at one scrape (several label sets) are summed, except KV-cache
    usage, whose largest value is kept. A file with `metric` in place of `name` is read too.
    """
    path = run_dir / "server_metrics.parquet"
    if not path.exists():
        return None
    try:
        frame = pl.read_parquet(path)
    except Exception as err:
        raise InputError(f"{path}: cannot read server metrics ({err})") from err
    if "name" in frame.columns and "metric" not in frame.columns:
        frame = frame.rename({"name": "metric"})
    missing = [c for c in SERVER_METRIC_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(missing)}; expected t_s, name, value"
        )
    frame = frame.select(SERVER_METRIC_COLUMNS).filter(
        pl.col("metric").is_in([QUEUE_METRIC, RUNNING_METRIC, KV_METRIC])
    )
    return (
        frame.group_by("metric", "t_s")
        .agg(
            pl.when(pl.col("metric").first() == KV_METRIC)
            .then(pl.col("value").max())
            .otherwise(pl.col("value").sum())
            .alias("value")
        )
        .sort("metric", "t_s")
    )


def _per_second_counts(times: np.ndarray, n_bins: int) -> np.ndarray:
    idx = np.floor(times).astype(np.int64)
    idx = idx[(idx >= 0) & (idx < n_bins)]
    return np.bincount(idx, minlength=n_bins).astype(float)


def rolling_p95(
    send_s: np.ndarray, ttft_s: np.ndarray, n_bins: int, window_s: float = ROLLING_WINDOW_S
) -> Series:
    """p95 of TTFT over requests sent in (t - window, t], for t = 1 .. n_bins seconds.

    Seconds with no request in their window are left out (NaN is not drawn).
    """
    order = np.argsort(send_s, kind="stable")
    send_sorted = send_s[order]
    ttft_sorted = ttft_s[order]
    xs: list[float] = []
    ys: list[float] = []
    for t in range(1, n_bins + 1):
        lo = np.searchsorted(send_sorted, t - window_s, side="right")
        hi = np.searchsorted(send_sorted, t, side="right")
        if hi > lo:
            xs.append(float(t))
            with np.errstate(invalid="ignore"):  # failed requests count as infinitely slow
                ys.append(float(np.percentile(ttft_sorted[lo:hi], 95)))
    return Series(np.array(xs), np.array(ys))


def build_timeline(
    records: pl.DataFrame, server_metrics: pl.DataFrame | None, run_end_s: float
) -> Timeline:
    """Per-second offered and achieved load, errors, rolling p95 TTFT and server gauges."""
    n_bins = max(1, int(np.ceil(run_end_s)))
    x = np.arange(n_bins, dtype=float) + 0.5
    send = records["intended_send_s"].to_numpy().astype(float)
    ok = records["ok"].fill_null(False).to_numpy().astype(bool)
    end = records["end_s"].to_numpy().astype(float)
    ttft = records["ttft_s"].to_numpy().astype(float)
    good = ok & np.isfinite(ttft) & np.isfinite(send)
    offered = _per_second_counts(send[np.isfinite(send)], n_bins)
    achieved = _per_second_counts(end[ok & np.isfinite(end)], n_bins)
    errors = _per_second_counts(send[~ok & np.isfinite(send)], n_bins)
    server: dict[str, Series] = {}
    if server_metrics is not None:
        for name in (QUEUE_METRIC, RUNNING_METRIC, KV_METRIC):
            part = server_metrics.filter(pl.col("metric") == name).sort("t_s")
            if part.height:
                server[name] = Series(
                    part["t_s"].to_numpy().astype(float), part["value"].to_numpy().astype(float)
                )
    return Timeline(
        offered_rps=Series(x, offered),
        achieved_rps=Series(x, achieved),
        errors_per_s=Series(x, errors),
        ttft_p95_rolling_s=rolling_p95(send[good], ttft[good], n_bins),
        server=server,
    )


def sha256_of(path: Path) -> str:
    """sha256 of a file's bytes (streamed)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_inputs(
    profile_path: Path,
    run_dir: Path,
    plan_path: Path,
    *,
    previous_plan: Path | None = None,
    limit_path: Path | None = None,
) -> ReportInputs:
    """Load and validate every input of a report; raises InputError on a missing or bad file."""
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: run directory not found")
    limit_file = limit_path if limit_path is not None else run_dir / "limit.json"
    profile = load_profile(profile_path)
    run = load_run_info(run_dir)
    stages = load_stages(run_dir)
    limit = load_limit(limit_file)
    plan = load_plan(plan_path)
    previous = load_plan(previous_plan) if previous_plan is not None else None
    records = load_records(run_dir)
    timeline = None
    if records is not None and records.height:
        run_end_s = max([s.end_s for s in stages] + [0.0])
        if run_end_s <= 0:
            run_end_s = float(np.nanmax(records["intended_send_s"].to_numpy())) + 1.0
        timeline = build_timeline(records, load_server_metrics(run_dir), run_end_s)
    files = [
        ("profile", profile_path),
        ("run", run_dir / "run.json"),
        ("stages", run_dir / "stages.json"),
        ("records", run_dir / "records.parquet"),
        ("server_metrics", run_dir / "server_metrics.parquet"),
        ("limit", limit_file),
        ("plan", plan_path),
    ]
    if previous_plan is not None:
        files.append(("previous", previous_plan))
    digests = [InputDigest(role, str(p), sha256_of(p)) for role, p in files if p.exists()]
    return ReportInputs(
        profile=profile,
        profile_path=profile_path,
        run=run,
        run_dir=run_dir,
        stages=stages,
        limit=limit,
        limit_path=limit_file,
        plan=plan,
        plan_path=plan_path,
        previous=previous,
        previous_path=previous_plan,
        timeline=timeline,
        digests=digests,
    )
