"""`vllm bench serve`'s conventions in a load test: a request-count stage of fixed-length
synthetic traffic, and the summary vLLM prints (pure: records in, a `ServingSummary` out).

vLLM's definitions, kept here: percentiles are over the successful requests (failures are
counted apart, as vLLM does); TTFT, TPOT (per request, excluding the first token), ITL (every
gap between content chunks, pooled) and E2EL in milliseconds, by numpy's linear percentile;
the benchmark duration runs from the first send to the last answer's end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from contracts.run import Stage, StagePlan

__all__ = [
    "METRICS",
    "MetricSummary",
    "ServingSummary",
    "count_plan",
    "parse_metric_percentiles",
    "parse_percentile_metrics",
    "serving_summary",
]

# vLLM's metric names -> the record column that holds them (seconds).
METRICS: dict[str, str] = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_gaps_s", "e2el": "e2e_s"}


def parse_percentile_metrics(text: str) -> tuple[str, ...]:
    """vLLM's --percentile-metrics ('ttft,tpot,itl'); raises ConfigError naming the option."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in METRICS]
    if bad or not names:
        raise ConfigError(
            f"--percentile-metrics {text!r}: expected a comma-separated list of "
            f"{', '.join(METRICS)}" + (f"; unknown: {', '.join(bad)}" if bad else "")
        )
    return tuple(dict.fromkeys(names))


def parse_metric_percentiles(text: str) -> tuple[float, ...]:
    """vLLM's --metric-percentiles ('25,50,99'); raises ConfigError naming the option."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not 0 < value < 100:
            raise ConfigError(
                f"--metric-percentiles {text!r}: expected percentiles between 0 and 100 "
                f"(exclusive), comma-separated, e.g. 50,90,99; got {part!r}"
            )
        out.append(value)
    if not out:
        raise ConfigError(f"--metric-percentiles {text!r}: expected at least one percentile")
    return tuple(dict.fromkeys(out))


def count_plan(prompts: int, rate_rps: float | None, arrival: str) -> StagePlan:
    """One stage that sends exactly `prompts` requests: all at once when `rate_rps` is None
    (vLLM's --request-rate inf), else at that rate with `arrival`'s gaps."""
    duration_s = prompts / rate_rps if rate_rps else 1e-3
    stage = Stage(
        name="benchmark",
        role="steady",
        duration_s=duration_s,
        rate_rps=rate_rps,
        arrival=arrival,
        requests=prompts,
    )
    return StagePlan(name="num-prompts", stages=[stage])


@dataclass(frozen=True, kw_only=True)
class MetricSummary:
    """One metric over the successful requests, in milliseconds (None: no sample)."""

    name: str
    mean_ms: float | None
    median_ms: float | None
    percentiles_ms: dict[float, float | None]


@dataclass(frozen=True, kw_only=True)
class ServingSummary:
    """What `vllm bench serve` prints, computed from a run's records."""

    requests: int
    successful: int
    failed: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    request_throughput_rps: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    metrics: tuple[MetricSummary, ...]


def _values_s(ok: pl.DataFrame, column: str) -> np.ndarray:
    series = ok[column]
    if column == "itl_gaps_s":
        series = series.explode()
    return series.drop_nulls().drop_nans().to_numpy().astype(float)


def _metric(ok: pl.DataFrame, name: str, percentiles: tuple[float, ...]) -> MetricSummary:
    ms = _values_s(ok, METRICS[name]) * 1000.0
    if ms.size == 0:
        return MetricSummary(
            name=name, mean_ms=None, median_ms=None, percentiles_ms=dict.fromkeys(percentiles)
        )
    at = np.percentile(ms, list(percentiles))
    return MetricSummary(
        name=name,
        mean_ms=float(ms.mean()),
        median_ms=float(np.median(ms)),
        percentiles_ms={p: float(v) for p, v in zip(percentiles, at, strict=True)},
    )


def serving_summary(
    records: pl.DataFrame, metrics: tuple[str, ...], percentiles: tuple[float, ...]
) -> ServingSummary:
    """vLLM's benchmark summary of `records` (a run's records.parquet rows): counts, duration,
    throughputs, and mean, median and each of `percentiles` of each of `metrics`."""
    ok = records.filter(pl.col("ok"))
    starts = records["sent_s"].drop_nulls()
    ends = ok["end_s"].drop_nulls()
    duration_s = (
        float(ends.max()) - float(starts.min())  # type: ignore[arg-type]
        if len(starts) and len(ends)
        else 0.0
    )
    n_in = int(ok["input_tokens"].sum())
    n_out = int(ok["output_tokens"].sum())
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    return ServingSummary(
        requests=records.height,
        successful=ok.height,
        failed=records.height - ok.height,
        duration_s=duration_s,
        input_tokens=n_in,
        output_tokens=n_out,
        request_throughput_rps=ok.height * per_s,
        input_tokens_per_s=n_in * per_s,
        output_tokens_per_s=n_out * per_s,
        total_tokens_per_s=(n_in + n_out) * per_s,
        metrics=tuple(_metric(ok, m, percentiles) for m in metrics),
    )
