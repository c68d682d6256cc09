"""The latencies whatif reports at the limit count requests as the verdicts do: one the
level's drain cut short has its age (it was still running, not lost), one that failed +inf."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from planner.limit.predict import censor, simulated_records
from planner.whatif.run import judged_p95


def _records() -> pl.DataFrame:
    """Twenty requests of 10 s sent one a second; the drain ends at 25 s, so the four sent
    after 15 s are still running and are cut there, aged 9 down to 6 s."""
    arrival = np.arange(20, dtype=float)
    records = simulated_records(arrival, np.full(20, 0.5), np.full(20, 10.0), np.full(20, 0.05))
    return censor(records, 25.0)


def test_a_request_the_drain_cut_short_counts_at_its_age_not_as_endless() -> None:
    records = _records()
    assert int((records["error_class"] == "cancelled").sum()) == 4
    # 16 finished at 10 s; 4 cut at ages 9, 8, 7, 6 s (20 %): the p95 is 10 s, not endless.
    assert judged_p95(records, "e2e_s") == 10.0
    assert judged_p95(records, "ttft_s") == 0.5  # their first tokens came before the cut


def test_a_failed_request_is_endless() -> None:
    records = _records().with_columns(
        pl.when(pl.col("intended_send_s") < 2)
        .then(pl.lit("http_500"))
        .otherwise(pl.col("error_class"))
        .alias("error_class"),
        pl.when(pl.col("intended_send_s") < 2).then(False).otherwise(pl.col("ok")).alias("ok"),
        pl.when(pl.col("intended_send_s") < 2).then(None).otherwise(pl.col("e2e_s")).alias("e2e_s"),
    )
    assert math.isinf(judged_p95(records, "e2e_s") or 0.0)  # 2 of 20 failed: 10 % > 5 %
