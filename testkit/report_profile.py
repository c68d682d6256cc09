"""The report fixture's profile: a one-day chat service with a diurnal shape and three
bursts, built from the typed contracts (`testkit.report_inputs` writes it with its run and
plan)."""

from __future__ import annotations

import math

import numpy as np

from contracts.run import Percentiles
from profiles.model import (
    Arrivals,
    Burst,
    GammaShape,
    Histogram,
    LengthClasses,
    Lengths,
    LengthStats,
    LruPoint,
    Prefix,
    Profile,
    Quantiles,
    RateSeries,
    Sampler,
    Sessions,
    SharedPrefix,
    Source,
)


def _histogram(rng: np.random.Generator, mean_log: float, sigma: float) -> Histogram:
    values = rng.lognormal(mean_log, sigma, 20_000)
    edges = np.logspace(0, math.log10(max(values.max(), 10.0) * 1.01), 31)
    counts, _ = np.histogram(values, bins=edges)
    return Histogram(edges=[float(e) for e in edges], counts=[int(c) for c in counts])


def _length_stats(rng: np.random.Generator, mean_log: float, sigma: float) -> LengthStats:
    values = rng.lognormal(mean_log, sigma, 20_000)
    summary = _pct(values).model_dump(include={"mean", "p50", "p90", "p95", "p99", "max"})
    histogram = _histogram(rng, mean_log, sigma)
    return LengthStats(**summary, min=float(values.min()), histogram=histogram)


def build_profile(seed: int = 0) -> Profile:
    """A one-day chat profile with a diurnal shape and three bursts."""
    rng = np.random.default_rng(seed)
    hours = np.arange(24)
    hour_shape = 14.0 + 12.0 * np.sin((hours - 8) / 24 * 2 * np.pi)
    minutes = np.arange(1440) / 60.0
    rates = np.interp(minutes, hours, hour_shape) * rng.gamma(20.0, 1 / 20.0, 1440)
    bursts = [
        Burst(start_s=36_000.0, duration_s=40.0, peak_rate_rps=61.0),
        Burst(start_s=50_400.0, duration_s=25.0, peak_rate_rps=55.0),
        Burst(start_s=64_800.0, duration_s=30.0, peak_rate_rps=58.0),
    ]
    for b in bursts:
        rates[int(b.start_s // 60)] = b.peak_rate_rps * 0.7
    return Profile(
        name="chat-prod-2026-10",
        created_at="2026-11-28T09:00:00Z",
        capplan_version="0.1.0",
        source=Source(
            files=["logs/chat-2026-10-14.jsonl.zst"],
            format="openai-jsonl",
            rows=1_209_600,
            rows_skipped=37,
            skip_reasons={"missing usage": 31, "bad timestamp": 6},
            tokens_estimated=False,
            first_timestamp="2026-10-14T00:00:00Z",
            digest="5f1d" * 16,
        ),
        arrivals=Arrivals(
            duration_s=86_400.0,
            mean_rate_rps=14.0,
            interarrival_cv=1.38,
            gamma_shape=GammaShape(moments=0.53, mle=0.61),
            peak_rate_rps={"1s": 74.0, "10s": 61.0, "60s": 44.5},
            peak_to_mean={"1s": 5.29, "10s": 4.36, "60s": 3.18},
            fano={"1s": 1.9, "10s": 4.2, "60s": 11.8},
            hour_of_day=[float(v) for v in hour_shape],
            bursts=bursts,
            rate_series=RateSeries(bin_s=60.0, rates_rps=[float(r) for r in rates]),
        ),
        lengths=Lengths(
            input=_length_stats(rng, 6.8, 0.8),
            output=_length_stats(rng, 4.9, 0.9),
            classes=LengthClasses(
                basis="input_tokens",
                short_max_tokens=512,
                long_min_tokens=4096,
                shares={"short": 0.18, "medium": 0.74, "long": 0.08},
            ),
            io_rank_correlation=0.21,
            sampler=Sampler(seed=seed, why="real pairs keep the joint shape", pairs=[(1020, 129)]),
        ),
        prefix=Prefix(
            available=True,
            block_tokens=16,
            ideal_hit_ratio=0.46,
            lru_hit_ratio=[
                LruPoint(cache_tokens=c, hit_ratio=h)
                for c, h in [
                    (65_536, 0.12),
                    (262_144, 0.24),
                    (1_048_576, 0.35),
                    (4_194_304, 0.42),
                    (16_777_216, 0.45),
                ]
            ],
            top_prefixes=[SharedPrefix(prefix_tokens=812, request_share=0.31, token_share=0.19)],
            top_prefixes_request_share=0.52,
            top_prefixes_token_share=0.27,
        ),
        sessions=Sessions(
            available=True,
            count=301_000,
            turns=Quantiles(mean=4.0, p50=3.0, p90=9.0, p99=24.0, max=80.0),
            think_time_s=Quantiles(mean=41.0, p50=22.0, p90=95.0, p99=400.0, max=3600.0),
            multi_turn_request_share=0.71,
        ),
        ok_share=0.996,
    )


def _pct(values: np.ndarray) -> Percentiles:
    if values.size == 0:
        return Percentiles()
    q = np.percentile(values, [50, 90, 95, 99])
    return Percentiles(
        count=int(values.size),
        mean=float(values.mean()),
        p50=float(q[0]),
        p90=float(q[1]),
        p95=float(q[2]),
        p99=float(q[3]),
        max=float(values.max()),
    )
