"""SLO verdicts: stage evaluation of per-request records (the parsing is test_slo_spec.py's)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from contracts.errors import InputError
from planner.slo.spec import parse_slo
from planner.slo.verdict import evaluate, exclude_warmup, good_mask


def _records(
    ttft_s: list[float],
    tpot_s: list[float | None] | None = None,
    ok: list[bool] | None = None,
    e2e_s: list[float] | None = None,
) -> pl.DataFrame:
    n = len(ttft_s)
    return pl.DataFrame(
        {
            "intended_send_s": [float(i) for i in range(n)],
            "ttft_s": ttft_s,
            "tpot_s": tpot_s if tpot_s is not None else [0.05] * n,
            "e2e_s": e2e_s if e2e_s is not None else [t + 1.0 for t in ttft_s],
            "ok": ok if ok is not None else [True] * n,
        },
        schema={
            "intended_send_s": pl.Float64,
            "ttft_s": pl.Float64,
            "tpot_s": pl.Float64,
            "e2e_s": pl.Float64,
            "ok": pl.Boolean,
        },
    )


def test_percentile_threshold_is_inclusive() -> None:
    # The top two of 20 samples are exactly 2 s, so p95 (linear interpolation) is exactly 2 s.
    records = _records([0.25] * 18 + [2.0, 2.0])
    slo = parse_slo("ttft:p95<=2s")
    result = evaluate(records, slo, duration_s=20.0).constraint("ttft:p95")
    assert result.value == 2.0
    assert result.passed and result.margin == 0.0
    assert not evaluate(records, parse_slo("ttft:p95<=1999ms"), duration_s=20.0).passed


def test_per_request_thresholds_are_inclusive_for_goodput() -> None:
    records = _records([2.0, 2.0, 2.5, 1.0], tpot_s=[0.1, 0.1000001, 0.05, None])
    slo = parse_slo("attainment>=50%:ttft<=2s,tpot<=100ms")
    mask = good_mask(records, slo)
    # 2.0 s / 100 ms exactly: good; TPOT above by 1e-7: not; TTFT 2.5 s: not; one-token: good.
    assert mask.tolist() == [True, False, False, True]
    evaluation = evaluate(records, slo, duration_s=4.0)
    assert evaluation.good == 2
    assert evaluation.attainment == pytest.approx(0.5)
    assert evaluation.goodput_rps == pytest.approx(0.5)
    assert evaluation.passed  # 50 % >= 50 %, inclusive


def test_errors_count_against_attainment_and_error_constraint() -> None:
    ttft = [0.5] * 10
    ok = [True] * 8 + [False] * 2
    records = _records(ttft, ok=ok)
    slo = parse_slo("attainment>=85%:ttft<=1s,errors<=10%")
    evaluation = evaluate(records, slo, duration_s=10.0)
    assert evaluation.scheduled == 10 and evaluation.completed == 8 and evaluation.errors == 2
    assert evaluation.attainment == pytest.approx(0.8)
    assert evaluation.goodput_rps == pytest.approx(0.8)
    assert not evaluation.constraint("attainment").passed
    errors = evaluation.constraint("errors")
    assert errors.value == pytest.approx(0.2) and not errors.passed
    assert errors.margin == pytest.approx(-0.1)
    assert not evaluation.passed
    assert evaluation.binding in {"attainment", "errors"}


def test_failed_requests_are_misses_in_percentiles() -> None:
    # 1 failed request in 10: p99 reaches into it, so the percentile is +inf and fails ...
    records = _records([0.1] * 9 + [0.1], ok=[True] * 9 + [False])
    evaluation = evaluate(records, parse_slo("ttft:p99<=200ms"), duration_s=10.0)
    result = evaluation.constraint("ttft:p99")
    assert result.value == float("inf") and not result.passed
    assert evaluation.errors == 1 and evaluation.error_rate == pytest.approx(0.1)
    # ... p80 stays among the successful ones (linear interpolation: 0.8 * 9 = 7.2 < 8) ...
    assert evaluate(records, parse_slo("ttft:p80<=200ms"), duration_s=10.0).passed
    # ... and with success-only percentiles (vLLM bench style) the failure leaves the sample.
    success_only = parse_slo("ttft:p99<=200ms", success_only=True)
    assert evaluate(records, success_only, duration_s=10.0).passed
    assert "successful requests only" in success_only.describe()
    # The error constraint counts it either way.
    assert not evaluate(records, parse_slo("ttft:p99<=200ms,errors<=5%"), duration_s=10.0).passed


def test_refusals_enter_the_tail_at_their_share() -> None:
    # 6 % refused (HTTP 429), the rest fast: p95 fails, p90 passes (Erlang-B style limits).
    n = 200
    ok = [i % 50 not in (0, 1, 2) for i in range(n)]  # 12 of 200 = 6 % fail
    records = _records([0.05] * n, ok=ok).with_columns(
        pl.when(pl.col("ok")).then(None).otherwise(pl.lit("refused")).alias("error_class")
    )
    evaluation = evaluate(records, parse_slo("ttft:p95<=1s"), duration_s=20.0)
    assert not evaluation.passed
    assert evaluation.errors_by_class == {"refused": 12}
    assert evaluate(records, parse_slo("ttft:p90<=1s"), duration_s=20.0).passed


def test_censored_requests_count_at_their_age() -> None:
    # Three requests still queued when the window closed (cancelled, no first token): their
    # TTFT is at least their age (end - sent = 3 s), which fails p90 <= 1 s; not errors.
    n = 20
    frame = _records([0.1] * n).with_columns(
        pl.Series("sent_s", [float(i) for i in range(n)]),
        pl.Series("end_s", [float(i) + 1.0 for i in range(n - 3)] + [20.0] * 3),
        pl.Series("ok", [True] * (n - 3) + [False] * 3),
        pl.Series("error_class", [None] * (n - 3) + ["cancelled"] * 3, dtype=pl.Utf8),
        pl.Series("ttft_s", [0.1] * (n - 3) + [None] * 3, dtype=pl.Float64),
    )
    frame = frame.with_columns(
        pl.Series("sent_s", [float(i) for i in range(n - 3)] + [17.0] * 3),
    )
    evaluation = evaluate(frame, parse_slo("ttft:p90<=1s,errors<=1%"), duration_s=20.0)
    assert evaluation.censored == 3 and evaluation.errors == 0
    assert evaluation.constraint("errors").passed
    ttft = evaluation.constraint("ttft:p90")
    assert ttft.value == pytest.approx(3.0) and not ttft.passed
    # Censored at an age under the threshold, they pass (a lower bound cannot fail them).
    young = frame.with_columns(pl.Series("end_s", [1.0] * (n - 3) + [17.5] * 3))
    assert evaluate(young, parse_slo("ttft:p90<=1s"), duration_s=20.0).passed
    # ... and goodput counts only what finished within the SLO: the 17 of 20 seconds' window,
    # not the 3 still in flight (they put the demo's goodput, 13.2 req/s, above its 12.3)
    attained = evaluate(young, parse_slo("attainment>=90%:ttft<=1s"), duration_s=20.0)
    assert attained.good == 20 and attained.goodput_rps == pytest.approx(17 / 20.0)


def test_nothing_succeeded_fails_with_an_infinite_value() -> None:
    records = _records([1.0] * 5, ok=[False] * 5)
    evaluation = evaluate(records, parse_slo("ttft:p95<=2s"), duration_s=5.0)
    result = evaluation.constraint("ttft:p95")
    assert result.value == float("inf") and not result.passed and result.certain
    assert not evaluation.passed and evaluation.certain


def test_warmup_window_is_excluded() -> None:
    # The first 5 requests (sent at 0..4 s) are slow; excluding 5 s of warm-up leaves fast ones.
    records = _records([10.0] * 5 + [0.1] * 15)
    slo = parse_slo("ttft:p95<=1s")
    assert not evaluate(records, slo, duration_s=20.0).passed
    evaluation = evaluate(records, slo, duration_s=20.0, warmup_s=5.0)
    assert evaluation.passed
    assert evaluation.scheduled == 15
    assert evaluation.goodput_rps == pytest.approx(15 / 15.0)
    assert exclude_warmup(records, 5.0, start_s=-2.0).height == 17


def test_bootstrap_interval_brackets_value_and_is_seeded() -> None:
    rng = np.random.default_rng(7)
    ttft = rng.lognormal(mean=0.0, sigma=0.5, size=500).tolist()
    records = _records(ttft)
    slo = parse_slo("ttft:p95<=3s")
    first = evaluate(records, slo, duration_s=500.0, rng=np.random.default_rng(1))
    again = evaluate(records, slo, duration_s=500.0, rng=np.random.default_rng(1))
    result = first.constraint("ttft:p95")
    assert result.interval is not None
    low, high = result.interval
    assert result.value is not None and low <= result.value <= high
    assert result.interval == again.constraint("ttft:p95").interval
    # The threshold sits inside the interval: the verdict is not certain.
    straddling = parse_slo(f"ttft:p95<={result.value:.4f}s")
    assert not evaluate(records, straddling, duration_s=500.0).certain
    # Far from the threshold it is.
    assert evaluate(records, parse_slo("ttft:p95<=100s"), duration_s=500.0).certain


def test_simulator_columns_are_enough() -> None:
    frame = pl.DataFrame(
        {
            "ttft_s": [0.2, 0.3, 5.0],
            "tpot_s": [0.02, 0.03, 0.04],
            "e2e_s": [1.0, 1.5, 9.0],
            "ok": [True, True, True],
        }
    )
    evaluation = evaluate(frame, parse_slo("attainment>=60%:ttft<=1s,e2e<=10s"), duration_s=3.0)
    assert evaluation.good == 2 and evaluation.passed
    assert evaluation.metrics["ttft_p50_s"] == pytest.approx(0.3)
    assert "itl_max_p95_s" not in evaluation.metrics
    with pytest.raises(InputError, match="intended_send_s"):
        evaluate(frame, parse_slo("ttft:p95<=1s"), duration_s=3.0, warmup_s=1.0)


def test_missing_metric_column_is_an_input_error() -> None:
    frame = pl.DataFrame({"ttft_s": [0.1], "ok": [True]})
    with pytest.raises(InputError, match="e2e_s"):
        evaluate(frame, parse_slo("e2e:p95<=1s"), duration_s=1.0)


def test_block_bootstrap_widens_intervals_for_a_queue_episode() -> None:
    # 300 requests in send order; requests 100..159 met a queue (slow, one after another).
    rng = np.random.default_rng(3)
    ttft = rng.uniform(0.05, 0.15, 300)
    ttft[100:160] = rng.uniform(0.8, 1.6, 60)
    ordered = _records(ttft.tolist())
    unordered = ordered.drop("intended_send_s")  # no send order: plain bootstrap
    slo = parse_slo("ttft:p90<=1s")
    with_order = evaluate(ordered, slo, duration_s=300.0).constraint("ttft:p90")
    without = evaluate(unordered, slo, duration_s=300.0).constraint("ttft:p90")
    assert with_order.value == without.value
    assert with_order.interval is not None and without.interval is not None
    width = with_order.interval[1] - with_order.interval[0]
    assert width > 1.5 * (without.interval[1] - without.interval[0])


def test_errors_by_class_counts_the_judged_window() -> None:
    records = pl.DataFrame(
        {
            "sent_s": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0],
            "ok": [False, True, False, False, True, False],
            "ttft_s": [None, 0.1, None, None, 0.2, None],
            "error_class": ["refused", None, "refused", "server_error", None, "disconnect"],
        }
    )
    slo = parse_slo("ttft:p95<=1s")
    ev = evaluate(records, slo, duration_s=6.0, warmup_s=0.8, start_s=0.0)
    assert ev.errors == 3
    assert ev.errors_by_class == {"disconnect": 1, "refused": 1, "server_error": 1}
    simulated = records.drop("error_class")  # the fleet simulation's records have no classes
    assert evaluate(simulated, slo, duration_s=6.0).errors_by_class == {}
