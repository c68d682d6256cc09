"""Observed latencies from per-request values: the `observed.latency` of a profile read from
traces (OpenTelemetry GenAI spans with vLLM's latency attributes), exact percentiles over the
requests rather than a histogram's interpolation (so `bucket_edges_s` is empty)."""

from __future__ import annotations

import numpy as np
import polars as pl

from profiles.model import LatencyStats, Observed

# Per-request latency columns a reader may add to the canonical table -> observed role.
LATENCY_COLUMNS = {"ttft_s": "ttft", "queue_s": "queue", "e2e_s": "e2e"}


def latency_stats(values: np.ndarray) -> LatencyStats:
    """Mean and p50/p90/p95/p99 (linear interpolation between order statistics) of `values`."""
    p50, p90, p95, p99 = (float(q) for q in np.percentile(values, [50, 90, 95, 99]))
    return LatencyStats(
        requests=int(values.size),
        mean_s=float(values.mean()),
        p50_s=p50,
        p90_s=p90,
        p95_s=p95,
        p99_s=p99,
        bucket_edges_s=[],
    )


def observed_from_frame(frame: pl.DataFrame) -> Observed | None:
    """The observed latencies of the rows that carry them (None where no column is there).

    TPOT per request is (e2e - ttft) / (output_tokens - 1), for requests with more than one
    output token and both latencies (the metric definitions in the README)."""
    latency: dict[str, LatencyStats] = {}
    for column, role in LATENCY_COLUMNS.items():
        if column in frame.columns:
            values = frame[column].drop_nulls().to_numpy()
            if values.size:
                latency[role] = latency_stats(values)
    if {"ttft_s", "e2e_s"} <= set(frame.columns):
        tpot = (
            frame.filter(pl.col("output_tokens") > 1)
            .select((pl.col("e2e_s") - pl.col("ttft_s")) / (pl.col("output_tokens") - 1))
            .to_series()
            .drop_nulls()
            .to_numpy()
        )
        if tpot.size:
            latency["tpot"] = latency_stats(tpot)
    return Observed(latency=latency) if latency else None
