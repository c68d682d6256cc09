"""A run's timeline, computed once for the report to draw: per-second offered, achieved and
failed requests, the rolling p95 TTFT and the server's queue, running and KV-cache gauges.

The rolling p95 is the burst recovery's own (contracts.recovery.rolling_p95: TTFT from the
intended send, failures as +infinity), so the timeline, the recovery chart and the stated
recovery time read one definition. Pure except `run_timeline`, which reads the run directory
through contracts.rundir.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from contracts.recovery import rolling_p95
from contracts.run import StageSummary
from contracts.rundir import read_records, read_server_metrics

QUEUE_METRIC = "vllm:num_requests_waiting"
RUNNING_METRIC = "vllm:num_requests_running"
KV_METRIC = "vllm:kv_cache_usage_perc"
TIMELINE_STEP_S = 1.0


@dataclass(frozen=True)
class Series:
    """One x/y series for a chart (x in seconds since run start)."""

    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Timeline:
    """Per-second series of a run. `ttft_p95_rolling_s` is +inf where failures reach the
    p95 and absent where the window held fewer than 3 requests."""

    offered_rps: Series
    achieved_rps: Series
    errors_per_s: Series
    ttft_p95_rolling_s: Series
    server: dict[str, Series]


def server_gauges(metrics: pl.DataFrame) -> dict[str, Series]:
    """The queue, running and KV-cache gauges per scrape, from server_metrics rows (t_s,
    name, value): samples of one gauge at one scrape (several label sets, e.g. one per
    engine) are summed, except KV-cache usage, whose largest value is kept."""
    out: dict[str, Series] = {}
    for name in (QUEUE_METRIC, RUNNING_METRIC, KV_METRIC):
        rows = metrics.filter(pl.col("name") == name)
        if rows.height == 0:
            continue
        value = pl.col("value").max() if name == KV_METRIC else pl.col("value").sum()
        per_scrape = rows.group_by("t_s").agg(value).sort("t_s")
        out[name] = Series(
            per_scrape["t_s"].to_numpy().astype(float), per_scrape["value"].to_numpy().astype(float)
        )
    return out


def _per_second_counts(times: np.ndarray, n_bins: int) -> np.ndarray:
    idx = np.floor(times[np.isfinite(times)]).astype(np.int64)
    idx = idx[(idx >= 0) & (idx < n_bins)]
    return np.bincount(idx, minlength=n_bins).astype(float)


def build_timeline(records: pl.DataFrame, metrics: pl.DataFrame, run_end_s: float) -> Timeline:
    """Per-second series of `records` (RECORD_COLUMNS) and server `metrics` from 0 to
    `run_end_s`: requests scheduled, succeeded (by end) and failed (by schedule) per second."""
    n_bins = max(1, int(np.ceil(run_end_s)))
    x = np.arange(n_bins, dtype=float) + 0.5
    send = records["intended_send_s"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    end = records["end_s"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    ok = records["ok"].fill_null(False).to_numpy().astype(bool)
    t, p95 = rolling_p95(records, TIMELINE_STEP_S, float(n_bins), TIMELINE_STEP_S)
    drawn = ~np.isnan(p95)
    return Timeline(
        offered_rps=Series(x, _per_second_counts(send, n_bins)),
        achieved_rps=Series(x, _per_second_counts(end[ok], n_bins)),
        errors_per_s=Series(x, _per_second_counts(send[~ok], n_bins)),
        ttft_p95_rolling_s=Series(t[drawn], p95[drawn]),
        server=server_gauges(metrics),
    )


def run_timeline(run_dir: Path, stages: list[StageSummary]) -> Timeline | None:
    """The timeline of the run in `run_dir` (None without records), up to its last stage's
    end (or a second after its last send when stages.json has none)."""
    records = read_records(run_dir)
    if records.height == 0:
        return None
    run_end_s = max([s.end_s for s in stages] + [0.0])
    if run_end_s <= 0:
        run_end_s = float(np.nanmax(records["intended_send_s"].to_numpy())) + 1.0
    return build_timeline(records, read_server_metrics(run_dir), run_end_s)
