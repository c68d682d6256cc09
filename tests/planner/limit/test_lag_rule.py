"""A level's validity: the load generator's schedule lag p99 is held against a tenth of the
SLO's tightest TTFT or E2E bound (Slo.lag_bound_s), the latencies a late send can move."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from planner.limit.measured.config import SearchConfig
from planner.limit.measured.search import judge_level
from planner.limit.probe import LevelMeasurement
from planner.slo.spec import parse_slo


@pytest.mark.parametrize(
    ("slo", "lag_s", "invalid"),
    [
        # TPOT is the tightest threshold, but a late send moves no per-token time: 50 ms of
        # lag against ttft<=2s is valid (it was refused against tpot's 100 ms before)
        ("ttft:p95<=2s,tpot:p95<=100ms", 0.05, False),
        ("ttft:p95<=2s,tpot:p95<=100ms", 0.25, True),  # over a tenth of the TTFT bound
        ("ttft:p95<=300ms", 0.05, True),
        ("tpot:p95<=100ms", 0.05, True),  # no TTFT or E2E bound: the tightest of all
    ],
)
def test_schedule_lag_is_held_against_the_latencies_a_late_send_moves(
    slo: str, lag_s: float, invalid: bool
) -> None:
    """The load generator's lag p99 against a tenth of the TTFT/E2E bound (Slo.lag_bound_s):
    latencies are measured from the actual send, so a late send moves arrivals and the
    queue a TTFT sees, never the per-token times. Issue 61's limit guide on a busy machine
    (6x emulator, lag p99 88-220 ms of engine time, tpot<=100ms tightest) ran level after
    level down to a quarter of the limit, each refused as invalid."""
    rng = np.random.default_rng(0)
    n = 2000
    sent = np.sort(rng.uniform(0.0, 200.0, n))
    ttft = rng.lognormal(np.log(0.05), 0.2, n)
    tpot = rng.lognormal(np.log(0.01), 0.2, n)
    records = pl.DataFrame({
        "intended_send_s": sent - lag_s, "sent_s": sent, "first_token_s": sent + ttft,
        "end_s": sent + ttft + 99 * tpot, "ttft_s": ttft, "tpot_s": tpot,
        "e2e_s": ttft + 99 * tpot, "ok": np.ones(n, dtype=bool),
        "schedule_lag_s": np.full(n, lag_s),
    })  # fmt: skip
    level = LevelMeasurement(load=10.0, stage="level-01", records=records, duration_s=200.0)
    config = SearchConfig(slo=parse_slo(slo))
    outcome = judge_level(config, 10.0, [level], np.random.default_rng(1))
    assert (outcome.verdict == "invalid") is invalid, outcome.invalid
