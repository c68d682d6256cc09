"""Steady-state rules: the correlation time against the AR(1) formula, and levels that must
run longer while their latencies still climb or stay correlated."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from planner.limit.measured.steady import SteadyRules, assess, correlation_requests
from planner.slo.spec import parse_slo

SLO = parse_slo("ttft:p95<=100s")  # far above the values: no clipping of the series


def _records(ttft_s: np.ndarray, rate_rps: float) -> pl.DataFrame:
    send = np.arange(ttft_s.size) / rate_rps
    return pl.DataFrame(
        {
            "intended_send_s": send,
            "sent_s": send,
            "ttft_s": ttft_s,
            "e2e_s": ttft_s + 0.1,
            "end_s": send + ttft_s + 0.1,
            "ok": np.ones(ttft_s.size, dtype=bool),
            "error_class": [None] * ttft_s.size,
        }
    )


def _ar1(phi: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, 1.0, n)
    x = np.empty(n)
    x[0] = noise[0] / np.sqrt(1 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    return 5.0 + 0.2 * x


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8, 0.9])
def test_correlation_time_matches_the_ar1_formula(phi: float) -> None:
    # An AR(1) series has integrated autocorrelation time (1 + phi) / (1 - phi).
    truth = (1 + phi) / (1 - phi)
    estimates = [correlation_requests(_records(_ar1(phi, 20_000, s), 10.0), SLO) for s in (1, 2)]
    assert np.mean(estimates) == pytest.approx(truth, rel=0.15, abs=0.2)


def test_failures_count_in_the_correlation_time() -> None:
    # Failures come in runs: each request switches between failing and fast with chance
    # 1/50 (a random telegraph: autocorrelation 0.96^k, integrated time (1 + 0.96) / 0.04).
    switches = np.random.default_rng(5).random(20_000) < 1 / 50
    ok = np.cumsum(switches) % 2 == 0
    records = _records(np.full(ok.size, 0.2), 10.0).with_columns(
        pl.Series("ok", ok), pl.Series("error_class", [None if k else "http_503" for k in ok])
    )
    assert correlation_requests(records, parse_slo("ttft:p95<=1s")) == pytest.approx(49, rel=0.3)


def test_a_level_with_correlated_latencies_runs_until_enough_are_independent() -> None:
    rules = SteadyRules(effective_requests=100, tail_requests=0, warmup_taus=0, min_window_s=30.0)
    rate = 10.0
    for phi, ready in ((0.0, True), (0.95, False)):
        records = _records(_ar1(phi, 1200, 3), rate)  # 120 s, 1,200 requests
        state = assess(records, start_s=0.0, now_s=120.0, rate_rps=rate, rules=rules, slo=SLO)
        assert state.ready is ready, (phi, state.evidence())
    # phi 0.95 (tau 39): about 3,900 requests, not 1,200.
    records = _records(_ar1(0.95, 6000, 3), rate)
    state = assess(records, start_s=0.0, now_s=600.0, rate_rps=rate, rules=rules, slo=SLO)
    assert state.ready and "independent" in state.evidence()


def test_a_climbing_start_lengthens_the_warm_up() -> None:
    # Latency climbs for the first 60 s (a queue filling from empty), then holds.
    rate = 10.0
    t = np.arange(3000) / rate
    rng = np.random.default_rng(4)
    ttft = np.minimum(t, 60.0) / 20 + rng.uniform(0.0, 0.05, t.size)
    records = _records(ttft, rate)
    plain = assess(  # the same E2E rule, no correlation rule
        records,
        start_s=0.0,
        now_s=300.0,
        rate_rps=rate,
        rules=SteadyRules(warmup_taus=0, warmup_e2es=3.0),
        slo=SLO,
    )
    by_tau = assess(
        records,
        start_s=0.0,
        now_s=300.0,
        rate_rps=rate,
        rules=SteadyRules(warmup_taus=3.0, warmup_e2es=3.0),
        slo=SLO,
    )
    assert by_tau.warmup_s > plain.warmup_s
    assert by_tau.correlation > 10
