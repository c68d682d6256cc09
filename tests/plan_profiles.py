"""Small Profile objects built in code for the planner's tests (no reader needed)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from profiles.model import (
    Arrivals,
    GammaShape,
    Histogram,
    LengthClasses,
    Lengths,
    LengthStats,
    Prefix,
    Profile,
    RateSeries,
    Sampler,
    Sessions,
    Source,
)


def _stats(values: np.ndarray) -> LengthStats:
    edges = np.geomspace(1, max(2.0, float(values.max()) + 1), 9)
    counts, _ = np.histogram(values, bins=edges)
    return LengthStats(
        mean=float(values.mean()),
        p50=float(np.percentile(values, 50)),
        p90=float(np.percentile(values, 90)),
        p95=float(np.percentile(values, 95)),
        p99=float(np.percentile(values, 99)),
        max=float(values.max()),
        min=float(values.min()),
        histogram=Histogram(edges=[float(e) for e in edges], counts=[int(c) for c in counts]),
    )


def make_profile(
    window_rates_60s: list[float] | None = None,
    mean_rate_rps: float = 5.0,
    peak_10s_rps: float = 12.0,
    interarrival_cv: float = 1.5,
    pairs: list[tuple[int, int]] | None = None,
) -> Profile:
    """A profile whose 60 s window-rate percentiles are `window_rates_60s` (101 values)."""
    if window_rates_60s is None:
        window_rates_60s = [float(x) for x in np.linspace(1.0, 10.0, 101)]
    if pairs is None:
        rng = np.random.default_rng(7)
        pairs = [(int(rng.integers(100, 2000)), int(rng.integers(20, 400))) for _ in range(200)]
    inputs = np.array([p[0] for p in pairs], dtype=float)
    outputs = np.array([p[1] for p in pairs], dtype=float)
    arrivals = Arrivals(
        duration_s=3600.0,
        mean_rate_rps=mean_rate_rps,
        interarrival_cv=interarrival_cv,
        gamma_shape=GammaShape(moments=1.0 / interarrival_cv**2, mle=None),
        peak_rate_rps={"1s": peak_10s_rps * 1.5, "10s": peak_10s_rps, "60s": window_rates_60s[-1]},
        peak_to_mean={"60s": window_rates_60s[-1] / mean_rate_rps},
        fano={"60s": 2.0},
        window_rate_percentiles={"60s": window_rates_60s},
        rate_series=RateSeries(bin_s=60.0, rates_rps=[mean_rate_rps] * 60),
    )
    lengths = Lengths(
        input=_stats(inputs),
        output=_stats(outputs),
        classes=LengthClasses(
            basis="input_tokens", short_max_tokens=512, long_min_tokens=4096, shares={}
        ),
        io_rank_correlation=None,
        sampler=Sampler(seed=7, pairs=pairs),
    )
    return Profile(
        source=Source(
            files=["fixture"],
            format="fixture",
            rows=len(pairs),
            rows_skipped=0,
            tokens_estimated=False,
            digest="fixture",
        ),
        arrivals=arrivals,
        lengths=lengths,
        prefix=Prefix(available=False, block_tokens=16),
        sessions=Sessions(available=False),
    )


AZURE_CONV = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "data"
    / "AzureLLMInferenceTrace_conv.csv"
)


@functools.cache
def azure_conv_profile() -> Profile:
    """The profile of the Azure conv trace, read by profiles.build (cached per test session)."""
    from profiles.build import build_profile

    return build_profile([str(AZURE_CONV)])
