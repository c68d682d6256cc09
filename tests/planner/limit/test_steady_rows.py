"""The watcher's array path (`RecordColumns`, `assess_rows`) judges every check exactly as
`assess` over the records known by then, and the correlation time's vectorised sum stops
where the plain loop does."""

from __future__ import annotations

import bisect
import dataclasses
import math

import numpy as np
import polars as pl
import pytest

from planner.engine import build_engine_config
from planner.fleet.sim import FleetRun, FleetSimulation
from planner.fleet.traffic import profile_requests
from planner.limit.measured.steady import (
    LevelState,
    SteadyRules,
    assess,
    in_flight_series,
    integrated_autocorrelation,
)
from planner.limit.measured.steady_rows import RecordColumns, assess_rows
from planner.limit.predict import EngineProbe, KnownRecords, censor, simulated_records
from planner.limit.probe import AbandonColumns, AbandonRule
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile

SLO = parse_slo("ttft:p99<=2s,tpot:p99<=50ms")


def _level(seed: int) -> pl.DataFrame:
    """A 300 s level at 10 req/s whose queue fills after 150 s: correlated, climbing
    latencies, one-token answers (no TPOT), failures, and requests still running at the
    drain (cancelled) or never finished (no end)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(0.1, 3000))
    queue = np.maximum(arrival - 150.0, 0.0) * 0.02 + 0.3 * np.abs(
        np.convolve(rng.normal(size=arrival.size), np.ones(30) / 30, mode="same")
    )
    ttft = 0.2 + queue
    tpot = 0.03 + 0.002 * rng.random(arrival.size) + 0.001 * queue
    tpot[rng.random(arrival.size) < 0.05] = np.nan
    e2e = ttft + 100 * np.nan_to_num(tpot)
    e2e[rng.random(arrival.size) < 0.01] = np.nan  # never finished
    records = censor(simulated_records(arrival, ttft, e2e, tpot), 290.0)
    failed = rng.random(records.height) < 0.02
    return records.with_columns(
        pl.when(pl.Series(failed)).then(False).otherwise(pl.col("ok")).alias("ok"),
        pl.when(pl.Series(failed))
        .then(pl.lit("http_503"))
        .otherwise(pl.col("error_class"))
        .alias("error_class"),
    )


def _same(a: LevelState, b: LevelState) -> None:
    for key, x in dataclasses.asdict(a).items():
        y = getattr(b, key)
        assert type(x) is type(y) and (x == y or (x != x and y != y)), (key, x, y)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    "rules",
    [SteadyRules(), SteadyRules(min_window_s=20.0, effective_requests=10.0, tail_requests=1.0)],
)
def test_assess_rows_judges_each_check_as_assess_over_the_known_records(
    seed: int, rules: SteadyRules
) -> None:
    full = _level(seed)
    columns = RecordColumns.of(full, SLO)
    end_s = full["end_s"].to_numpy()
    sent_s = full["intended_send_s"].to_numpy()
    seen = set()
    for t in np.arange(5.0, 300.0, 5.0):
        known = full.filter(pl.col("end_s") <= t)
        grid, counts = in_flight_series(full.filter(pl.col("intended_send_s") <= t), 0.0, t)
        rows_counts = columns.in_flight(np.flatnonzero(sent_s <= t), 0.0, t)
        assert np.array_equal(rows_counts, counts)
        how = {"start_s": 0.0, "now_s": t, "rate_rps": 10.0, "rules": rules, "slo": SLO}
        expected = assess(known, in_flight=(grid, counts), **how)  # type: ignore[arg-type]
        rows = np.flatnonzero(end_s <= t)
        got = assess_rows(columns, rows, in_flight=(grid, counts), **how)  # type: ignore[arg-type]
        _same(got, expected)
        seen.add((expected.ready, expected.unstable is not None, expected.correlation > 1.0))
    # The checks went through each branch: not ready and ready (the tail's halves then
    # judged), settled and unstable, with a correlation time.
    for branch in range(3):
        assert {key[branch] for key in seen} == {False, True}, seen


def _loop(x: np.ndarray, c: float = 5.0) -> float:
    """The correlation time's sum as a plain loop (what the vectorised one replaced), over
    the autocorrelation summed directly (no FFT, no padding)."""
    x = x - x.mean()
    n = x.size
    var = float(np.dot(x, x)) / n
    if var <= 0:
        return 1.0
    acf = np.correlate(x, x, mode="full")[n - 1 :] / (var * n)
    tau = 1.0
    for m in range(1, n):
        tau += 2.0 * acf[m]
        if m >= c * tau:
            break
    return max(tau, 1.0)


def test_the_correlation_time_sums_and_stops_as_the_loop_does() -> None:
    rng = np.random.default_rng(7)
    # 4099 and 5003 are prime: their 2n is padded to a length of small factors.
    for n, phi in ((2, 0.0), (3, 0.9), (25, 0.5), (400, 0.99), (4099, 0.95), (5003, -0.3)):
        noise = rng.normal(size=n)
        x = np.empty(n)
        x[0] = noise[0]
        for i in range(1, n):
            x[i] = phi * x[i - 1] + noise[i]
        assert math.isclose(integrated_autocorrelation(x), _loop(x), rel_tol=1e-9), (n, phi)
    assert integrated_autocorrelation(np.full(50, 3.0)) == 1.0


@pytest.mark.parametrize(
    "slo_text",
    [
        "ttft:p99<=2s,tpot:p99<=50ms",
        "e2e:p90<=6s,ttft:p50<=0.5s",
        "attainment>=90%:ttft<=1s,e2e<=8s",
    ],
)
def test_hopeless_rows_gives_up_where_hopeless_does(slo_text: str) -> None:
    # The level's records with the ones still running at 200 s as a live client knows
    # them: no outcome, no end, no first token where it had none yet (those cancelled at
    # 290 s are kept: censored, not failed).
    slo = parse_slo(slo_text)
    full = _level(3)
    running = (pl.col("end_s") > 200.0) & (pl.col("end_s") < 290.0)
    full = full.with_columns(
        pl.when(running).then(None).otherwise(pl.col("ok")).alias("ok"),
        pl.when(running).then(None).otherwise(pl.col("end_s")).alias("end_s"),
        pl.when(pl.col("first_token_s") > 200.0)
        .then(None)
        .otherwise(pl.col("first_token_s"))
        .alias("first_token_s"),
    )
    # And a few holes: successful requests without a TTFT, requests without a send time.
    row = pl.int_range(pl.len())
    full = full.with_columns(
        pl.when(row % 97 == 0).then(None).otherwise(pl.col("ttft_s")).alias("ttft_s"),
        pl.when(row % 89 == 0).then(None).otherwise(pl.col("sent_s")).alias("sent_s"),
    )
    reasons = set()
    for share, success_only in ((0.5, False), (0.02, False), (0.5, True)):
        rule = AbandonRule(slo=dataclasses.replace(slo, success_only=success_only),
                           error_rate=share)  # fmt: skip
        columns = AbandonColumns.of(full, rule)
        assert columns is not None
        sent = full["intended_send_s"].to_numpy()
        for t in np.arange(5.0, 290.0, 5.0):  # past 200 s: requests waiting
            rows = np.flatnonzero(sent <= t)
            how = {"now_s": t, "start_s": 0.0, "duration_s": 65.0, "warmup_s": 5.0}
            expected = rule.hopeless(full[rows], load=10.0, dimension="rate", **how)
            got = rule.hopeless_rows(columns, rows, load=10.0, dimension="rate", **how)
            assert got == expected, (t, got, expected)
            reasons.add(None if expected is None else expected.split()[1])
    assert {None, "of", "requests"} <= reasons, reasons  # kept on, errors, a lost tail


def _equal(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize(
    "slo_text",
    [
        "ttft:p99<=2s,tpot:p99<=50ms",
        "e2e:p90<=6s,ttft:p50<=0.5s,itl_max:p99<=0.2s",
        "attainment>=90%:ttft<=1s,e2e<=8s",
    ],
)
@pytest.mark.parametrize("success_only", [False, True])
def test_a_paused_runs_columns_read_from_its_arrays_are_the_frames(
    slo_text: str, success_only: bool
) -> None:
    """What the watcher reads of a paused virtual level (`KnownRecords.of_run`, from the
    run's arrays) is what it read of the level's records frame (`KnownRecords.of`), field by
    field; the frame itself is built only when a check asks for it."""
    config = build_engine_config("H100-80GB", "llama-3.1-8b", gpu_memory_utilization=0.25)
    requests = sorted(
        profile_requests(preset_profile("chat"), 9.0, 60.0, np.random.default_rng(5),
                         config.effective_max_model_len),
        key=lambda r: r.arrival_s,
    )  # fmt: skip
    # Every seventh a one-token answer: no TPOT.
    requests = [dataclasses.replace(r, max_tokens=1) if k % 7 == 0 else r
                for k, r in enumerate(requests)]  # fmt: skip
    slo = dataclasses.replace(parse_slo(slo_text), success_only=success_only)
    rule = AbandonRule(slo=slo)
    sim = FleetSimulation(requests, config, 1)
    arrivals = [r.arrival_s for r in requests]
    built = []
    for until_s in (4.0, 20.0, 45.0):
        sim.advance(until_s)
        run = sim.run(bisect.bisect_left(arrivals, until_s))
        unfinished = np.isnan(run.e2e_s)
        assert unfinished.any() and not unfinished.all()
        assert np.isnan(run.tpot_s[~unfinished]).any()  # one-token answers

        def frame(run: FleetRun = run, until_s: float = until_s) -> pl.DataFrame:
            built.append(until_s)
            return EngineProbe._records(run, requests)

        built.clear()
        fast = KnownRecords.of_run(run, slo, rule, frame)
        assert built == []
        slow = KnownRecords.of(frame(), slo, rule)
        assert fast.tally is not None and slow.tally is not None
        for name in ("end_s", "sent_s"):
            assert _equal(getattr(fast, name), getattr(slow, name)), name
        for f in dataclasses.fields(RecordColumns):
            if f.name != "frame_of":
                assert _equal(getattr(fast.columns, f.name), getattr(slow.columns, f.name)), f
        for f in dataclasses.fields(AbandonColumns):
            assert _equal(getattr(fast.tally, f.name), getattr(slow.tally, f.name)), f
        assert fast.columns.records.equals(slow.columns.records)
        assert built == [until_s, until_s]  # built when asked for, once: by each
