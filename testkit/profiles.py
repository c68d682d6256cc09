"""Profiles built in code for tests and bench scripts: one factory over the typed model."""

from __future__ import annotations

import numpy as np

from profiles.lengths import length_stats_all
from profiles.model import (
    Arrivals,
    GammaShape,
    Prefix,
    Profile,
    Quantiles,
    RateSeries,
    Sampler,
    Sessions,
    SharedPrefix,
    Source,
)


def make_profile(
    pairs: list[tuple[int, int]] | None = None,
    *,
    rate_rps: float = 5.0,
    peak_to_mean_10s: float = 2.0,
    interarrival_cv: float = 1.0,
    window_rates_60s: list[float] | None = None,
    prefixes: list[SharedPrefix] | None = None,
    sessions: int | None = None,
    rows: int = 1000,
    seed: int = 0,
) -> Profile:
    """A valid Profile of `rows` requests at `rate_rps` whose sampler holds `pairs`.

    `pairs` defaults to 200 seeded (input, output) pairs. `window_rates_60s` are the 0th..100th
    percentiles of 60 s window rates (default: evenly from 0.2x to 2x the mean). Peak rates:
    1.5x the 10 s peak over 1 s, `peak_to_mean_10s` x the mean over 10 s, the top window rate
    over 60 s. `prefixes` adds shared prefixes, `sessions` that many sessions.
    """
    if window_rates_60s is None:
        window_rates_60s = [float(x) for x in np.linspace(0.2, 2.0, 101) * rate_rps]
    if pairs is None:
        rng = np.random.default_rng(seed)
        pairs = [(int(rng.integers(100, 2000)), int(rng.integers(20, 400))) for _ in range(200)]
    peak_10s = rate_rps * peak_to_mean_10s
    peaks = {
        "1s": peak_10s * 1.5,
        "10s": peak_10s,
        "60s": window_rates_60s[-1],
    }
    # the profiler's own length statistics of the pairs; the sampler keeps them as given
    lengths = length_stats_all(
        np.array([p[0] for p in pairs], dtype=np.int64),
        np.array([p[1] for p in pairs], dtype=np.int64),
        seed,
    )
    sess = Sessions(available=False)
    if sessions is not None:
        sess = Sessions(
            available=True,
            count=sessions,
            turns=Quantiles(mean=rows / sessions, p50=2, p90=4, p99=8, max=8),
            context_growth_tokens=Quantiles(mean=20, p50=20, p90=40, p99=60, max=80),
        )
    return Profile(
        name="test",
        source=Source(
            files=["test"], format="preset", rows=rows, rows_skipped=0, tokens_estimated=True
        ),
        arrivals=Arrivals(
            duration_s=rows / rate_rps,
            mean_rate_rps=rate_rps,
            interarrival_cv=interarrival_cv,
            gamma_shape=GammaShape(moments=1.0 / interarrival_cv**2),
            peak_rate_rps=peaks,
            peak_to_mean={w: r / rate_rps for w, r in peaks.items()},
            fano={"1s": 1.0, "10s": 1.0, "60s": 1.0},
            window_rate_percentiles={"60s": window_rates_60s},
            rate_series=RateSeries(bin_s=1.0, rates_rps=[rate_rps]),
        ),
        lengths=lengths.model_copy(update={"sampler": Sampler(seed=seed, pairs=pairs)}),
        prefix=Prefix(
            available=prefixes is not None,
            block_tokens=16,
            top_prefixes=prefixes or [],
        ),
        sessions=sess,
    )
