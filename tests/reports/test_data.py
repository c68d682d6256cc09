"""The report's loaders and chart series: validation messages, per-second counts, rolling p95."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from bench.kit.report_inputs import write_fixture
from contracts.errors import InputError
from reports.data import (
    build_timeline,
    load_inputs,
    load_plan,
    load_server_metrics,
    rolling_p95,
)


def test_rolling_p95_uses_the_last_ten_seconds_of_sends() -> None:
    send = np.array([0.5, 1.5, 2.5, 12.5, 13.5])
    ttft = np.array([1.0, 2.0, 3.0, 10.0, 20.0])
    series = rolling_p95(send, ttft, n_bins=14)
    by_t = dict(zip(series.x.tolist(), series.y.tolist(), strict=True))
    assert by_t[1.0] == pytest.approx(1.0)
    assert by_t[3.0] == pytest.approx(np.percentile([1.0, 2.0, 3.0], 95))
    # at t=13 the window (3, 13] holds only the send at 12.5
    assert by_t[13.0] == pytest.approx(10.0)
    # seconds whose window is empty are left out, not drawn as zero
    assert 12.5 not in by_t and all(t in by_t for t in (1.0, 10.0, 11.0, 13.0, 14.0))


def test_timeline_counts_offered_achieved_and_errors_per_second() -> None:
    records = pl.DataFrame(
        {
            "stage": ["a"] * 4,
            "intended_send_s": [0.1, 0.2, 1.1, 1.5],
            "end_s": [0.9, 1.4, 1.9, 2.5],
            "ttft_s": [0.1, 0.2, None, 0.3],
            "ok": [True, True, False, True],
        }
    )
    metrics = pl.DataFrame(
        {"t_s": [0.0, 1.0], "metric": ["vllm:num_requests_waiting"] * 2, "value": [0.0, 3.0]}
    )
    tl = build_timeline(records, metrics, run_end_s=3.0)
    assert tl.offered_rps.y.tolist() == [2.0, 2.0, 0.0]
    assert tl.achieved_rps.y.tolist() == [1.0, 1.0, 1.0]
    assert tl.errors_per_s.y.tolist() == [0.0, 1.0, 0.0]
    assert tl.server["vllm:num_requests_waiting"].y.tolist() == [0.0, 3.0]


def test_bad_plan_names_file_and_field(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    data = json.loads(paths.plan.read_text())
    del data["cost"]
    paths.plan.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"q1\.json: field cost"):
        load_plan(paths.plan)
    paths.plan.write_text(json.dumps({"schema": "capplan.profile/1"}))
    with pytest.raises(InputError, match="capplan.plan/1"):
        load_plan(paths.plan)


def test_server_metrics_in_another_layout_is_a_clear_error(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    pl.DataFrame({"time": [0.0], "gauge": ["x"], "v": [1.0]}).write_parquet(
        paths.run_dir / "server_metrics.parquet"
    )
    with pytest.raises(InputError, match="missing column"):
        load_inputs(paths.profile, paths.run_dir, paths.plan)


def test_missing_limit_is_reported(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    (paths.run_dir / "limit.json").unlink()
    with pytest.raises(InputError, match=r"limit\.json: limit not found"):
        load_inputs(paths.profile, paths.run_dir, paths.plan)


def test_server_metrics_sum_label_sets_and_keep_the_largest_kv_usage(tmp_path: Path) -> None:
    pl.DataFrame(
        {
            "t_s": [1.0, 1.0, 1.0, 1.0, 1.0],
            "name": ["vllm:num_requests_waiting"] * 2
            + ["vllm:kv_cache_usage_perc"] * 2
            + ["vllm:prefix_cache_hits"],
            "labels": ['engine="0"', 'engine="1"', 'engine="0"', 'engine="1"', ""],
            "type": ["gauge"] * 4 + ["counter"],
            "value": [2.0, 3.0, 0.4, 0.7, 99.0],
        }
    ).write_parquet(tmp_path / "server_metrics.parquet")
    frame = load_server_metrics(tmp_path)
    assert frame is not None
    values = {row["metric"]: row["value"] for row in frame.iter_rows(named=True)}
    assert values == {"vllm:num_requests_waiting": 5.0, "vllm:kv_cache_usage_perc": 0.7}
