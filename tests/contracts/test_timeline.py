"""The run timeline the report draws: per-second counts, the rolling p95 and server gauges."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from contracts.run import RECORD_COLUMNS
from contracts.rundir import RECORDS_FILE, read_stages
from contracts.timeline import KV_METRIC, QUEUE_METRIC, build_timeline, run_timeline, server_gauges
from testkit.report_inputs import write_fixture

NO_METRICS = pl.DataFrame(schema={"t_s": pl.Float64, "name": pl.Utf8, "value": pl.Float64})


def _records(rows: list[dict[str, Any]]) -> pl.DataFrame:
    full = [{**dict.fromkeys(RECORD_COLUMNS), **row} for row in rows]
    return pl.DataFrame(full, schema=RECORD_COLUMNS)


def _request(send_s: float, ttft_s: float | None, *, lag_s: float = 0.0) -> dict[str, Any]:
    ok = ttft_s is not None
    return {
        "stage": "a",
        "intended_send_s": send_s,
        "sent_s": send_s + lag_s,
        "schedule_lag_s": lag_s,
        "first_token_s": send_s + lag_s + ttft_s if ok else None,
        "end_s": send_s + lag_s + (ttft_s if ok else 0.0) + 0.4,
        "ttft_s": ttft_s,
        "ok": ok,
        "error_class": None if ok else "refused",
    }


def test_counts_offered_achieved_and_errors_per_second() -> None:
    records = _records(
        [_request(0.1, 0.1), _request(0.2, 0.2), _request(1.1, None), _request(1.5, 0.3)]
    )
    tl = build_timeline(records, NO_METRICS, run_end_s=3.0)
    assert tl.offered_rps.y.tolist() == [2.0, 2.0, 0.0]
    # successes end at 0.6, 0.8 and 2.2; failures count by their schedule
    assert tl.achieved_rps.y.tolist() == [2.0, 0.0, 1.0]
    assert tl.errors_per_s.y.tolist() == [0.0, 1.0, 0.0]


def test_rolling_p95_counts_lag_and_failures_over_the_last_ten_seconds() -> None:
    # one request a second; the one at 4.5 s waited 2 s in the client, the one at 6.5 s failed
    rows = [_request(t + 0.5, 0.1) for t in range(20)]
    rows[4] = _request(4.5, 0.1, lag_s=2.0)
    rows[6] = _request(6.5, None)
    tl = build_timeline(_records(rows), NO_METRICS, run_end_s=20.0)
    by_t = dict(
        zip(tl.ttft_p95_rolling_s.x.tolist(), tl.ttft_p95_rolling_s.y.tolist(), strict=True)
    )
    # fewer than 3 requests in the window: not drawn
    assert 1.0 not in by_t and 2.0 not in by_t
    # at t = 6 the window holds sends 0.5 .. 5.5: TTFTs 0.1 x5 and 2.1 (lag counts)
    assert by_t[6.0] == pytest.approx(np.percentile([0.1] * 5 + [2.1], 95))
    # from t = 7 to 16 the failure at 6.5 is in the window: +inf
    assert all(math.isinf(by_t[float(t)]) for t in range(7, 17))
    # at t = 17 both have left the window: 10 requests of 0.1 s
    assert by_t[17.0] == pytest.approx(0.1)


def test_server_gauges_sum_label_sets_and_keep_the_largest_kv_usage() -> None:
    metrics = pl.DataFrame(
        {
            "t_s": [1.0, 1.0, 1.0, 1.0, 1.0],
            "name": [QUEUE_METRIC] * 2 + [KV_METRIC] * 2 + ["vllm:prefix_cache_hits"],
            "value": [2.0, 3.0, 0.4, 0.7, 99.0],
        }
    )
    gauges = server_gauges(metrics)
    assert set(gauges) == {QUEUE_METRIC, KV_METRIC}
    assert gauges[QUEUE_METRIC].y.tolist() == [5.0] and gauges[KV_METRIC].y.tolist() == [0.7]


def test_the_timeline_of_a_run_agrees_with_its_stored_recovery_curve(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    stages = read_stages(paths.run_dir)
    tl = run_timeline(paths.run_dir, stages)
    assert tl is not None
    (recovery,) = [s for s in stages if s.role == "recovery"]
    curve = recovery.recovery_curve
    assert curve is not None
    stored = dict(zip(curve.t_s, curve.ttft_p95_s, strict=True))
    shared = [t for t in tl.ttft_p95_rolling_s.x.tolist() if t in stored]
    assert len(shared) > 20
    drawn = dict(
        zip(tl.ttft_p95_rolling_s.x.tolist(), tl.ttft_p95_rolling_s.y.tolist(), strict=True)
    )
    for t in shared:
        assert stored[t] == pytest.approx(drawn[t]), t
    (paths.run_dir / RECORDS_FILE).unlink()
    assert run_timeline(paths.run_dir, stages) is None
