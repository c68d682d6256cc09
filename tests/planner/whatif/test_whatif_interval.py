"""The interval of a predicted limit (planner.whatif.interval): read from the spread table for
the candidate's engine and GPU class, wider for a class with a larger spread, the overall
spread (said so) for a class with too few rows, and a clear error for a bad table."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import ConfigError
from planner.whatif.interval import SpreadTable, default_spread, limit_interval, load_spread

TABLE = """
quantiles: [0.1, 0.9]
min_rows: 4
gpu_classes:
  hopper: [H100-80GB, H200-141GB]
  ampere: [A100-80GB]
overall: {rows: 20, low: 0.8, high: 1.25}
classes:
  sglang/hopper: {rows: 6, low: 0.95, high: 1.05}
  vllm/hopper: {rows: 5, low: 0.6, high: 1.5}
  vllm/ampere: {rows: 2, low: 0.99, high: 1.01}
"""


@pytest.fixture
def table(tmp_path: Path) -> SpreadTable:
    path = tmp_path / "spread.yaml"
    path.write_text(TABLE, encoding="utf-8")
    return load_spread(path)


def test_the_interval_is_the_class_s_spread_times_the_limit(table: SpreadTable) -> None:
    iv = limit_interval(10.0, "sglang", "H100-80GB", table)
    assert (iv.low_rps, iv.high_rps) == pytest.approx((9.5, 10.5))
    assert iv.basis == "sglang/hopper" and iv.rows == 6
    assert iv.note == "p10-p90 of 6 published sglang/hopper rows"


def test_a_class_with_a_larger_spread_gets_a_wider_interval(table: SpreadTable) -> None:
    narrow = limit_interval(10.0, "sglang", "H200-141GB", table)
    wide = limit_interval(10.0, "vllm@0.6", "H200-141GB", table)  # the version is not a class
    assert wide.basis == "vllm/hopper"
    assert (wide.low_rps, wide.high_rps) == pytest.approx((6.0, 15.0))
    assert wide.high_rps - wide.low_rps > 5 * (narrow.high_rps - narrow.low_rps)


def test_a_class_with_few_rows_or_none_takes_the_overall_spread_and_says_so(
    table: SpreadTable,
) -> None:
    few = limit_interval(10.0, "vllm", "A100-80GB", table)
    assert few.basis == "overall" and (few.low_rps, few.high_rps) == pytest.approx((8.0, 12.5))
    assert "vllm/ampere has 2 (fewer than 4)" in few.note
    unknown = limit_interval(10.0, "trtllm", "MI300X-192GB", table)
    assert unknown.basis == "overall" and "trtllm/other has 0" in unknown.note


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("classes: {}\n", "overall: needs numbers low, high and rows"),
        ("overall: {rows: 3, low: 1.2, high: 0.9}\n", "needs 0 < low <= high"),
        ("overall: {rows: 3, low: x, high: 1}\n", "overall: needs numbers"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_a_bad_table_names_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        load_spread(path)
    assert str(path) in str(err.value)


def test_the_shipped_table_is_readable_and_classes_hopper_and_ampere() -> None:
    shipped = default_spread()
    assert shipped.overall.rows > 0 and shipped.overall.low_ratio <= shipped.overall.high_ratio
    assert shipped.gpu_classes["H100-80GB"] == "hopper"
    assert shipped.gpu_classes["A100-80GB"] == "ampere"
