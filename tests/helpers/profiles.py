"""Small hand-built Profiles for load-test tests (no log needed)."""

from __future__ import annotations

from profiles.model import (
    Arrivals,
    GammaShape,
    Histogram,
    LengthClasses,
    Lengths,
    LengthStats,
    Prefix,
    Profile,
    Quantiles,
    RateSeries,
    Sampler,
    Sessions,
    SharedPrefix,
    Source,
)


def _stats(values: list[int]) -> LengthStats:
    v = sorted(values)

    def q(p: float) -> float:
        return float(v[min(len(v) - 1, int(p * len(v)))])

    return LengthStats(
        mean=sum(v) / len(v),
        p50=q(0.5),
        p90=q(0.9),
        p95=q(0.95),
        p99=q(0.99),
        max=float(v[-1]),
        min=float(v[0]),
        histogram=Histogram(edges=[0.0, float(v[-1]) + 1], counts=[len(v)]),
    )


def make_profile(
    pairs: list[tuple[int, int]],
    *,
    rate_rps: float = 5.0,
    peak_to_mean_10s: float = 2.0,
    prefixes: list[SharedPrefix] | None = None,
    sessions: int | None = None,
    rows: int = 1000,
) -> Profile:
    """A valid Profile whose sampler holds `pairs`; optional shared prefixes and sessions."""
    ins = [p[0] for p in pairs]
    outs = [p[1] for p in pairs]
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
            interarrival_cv=1.0,
            gamma_shape=GammaShape(moments=1.0),
            peak_rate_rps={
                "1s": rate_rps * 3,
                "10s": rate_rps * peak_to_mean_10s,
                "60s": rate_rps * 1.5,
            },
            peak_to_mean={"1s": 3.0, "10s": peak_to_mean_10s, "60s": 1.5},
            fano={"1s": 1.0, "10s": 1.0, "60s": 1.0},
            rate_series=RateSeries(bin_s=1.0, rates_rps=[rate_rps]),
        ),
        lengths=Lengths(
            input=_stats(ins),
            output=_stats(outs),
            classes=LengthClasses(
                basis="input_tokens",
                short_max_tokens=256,
                long_min_tokens=2048,
                shares={"short": 1.0, "medium": 0.0, "long": 0.0},
            ),
            io_rank_correlation=None,
            sampler=Sampler(seed=0, pairs=pairs),
        ),
        prefix=Prefix(
            available=prefixes is not None,
            block_tokens=16,
            top_prefixes=prefixes or [],
        ),
        sessions=sess,
    )
