"""--csv PREFIX: a run's records and stages, and a limit's levels, as CSV beside the Parquet
and JSON they come from (planner/loadtest/csvout.py), read back with the csv module."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from contracts.errors import InputError
from contracts.limit import load_limit
from contracts.rundir import read_records, read_stages
from planner.loadtest.csvout import write_limit_csv, write_run_csv
from testkit.report_inputs import write_fixture


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_run_becomes_one_csv_row_per_request_and_per_stage(tmp_path: Path) -> None:
    run_dir = write_fixture(tmp_path).run_dir
    written = write_run_csv(run_dir, str(tmp_path / "out" / "r"))
    assert [p.name for p in written] == ["r_records.csv", "r_stages.csv"]
    records, stages = read_records(run_dir), read_stages(run_dir)
    rows = _rows(written[0])
    assert len(rows) == records.height
    first = records.row(0, named=True)
    assert rows[0]["request_id"] == first["request_id"]
    gaps = first["itl_gaps_s"] or []
    assert rows[0]["itl_gaps_s"] == ";".join(str(g) for g in gaps)
    stage_rows = _rows(written[1])
    assert [r["name"] for r in stage_rows] == [s.name for s in stages]
    for row, stage in zip(stage_rows, stages, strict=True):
        assert float(row["ttft_s.p95"]) == pytest.approx(stage.ttft_s.p95)
        assert int(row["scheduled"]) == stage.scheduled


def test_a_limit_becomes_one_row_per_level_with_its_constraints(tmp_path: Path) -> None:
    run_dir = write_fixture(tmp_path).run_dir
    written = write_limit_csv(run_dir, str(tmp_path / "lim"))
    assert [p.name for p in written] == ["lim_levels.csv", "lim_records.csv", "lim_stages.csv"]
    levels = load_limit(run_dir).levels
    rows = _rows(written[0])
    assert [float(r["load"]) for r in rows] == [lv.load for lv in levels]
    for row, level in zip(rows, levels, strict=True):
        assert row["verdict"] == level.verdict
        assert row["constraints.0.name"] == "ttft:p95"
        assert float(row["constraints.0.value"]) == level.constraints[0].value
        assert float(row["metrics.ttft_p95_s"]) == level.metrics["ttft_p95_s"]


def test_a_limit_without_a_measured_run_writes_its_levels_only(tmp_path: Path) -> None:
    run_dir = write_fixture(tmp_path).run_dir
    fast = tmp_path / "fast"
    fast.mkdir()
    shutil.copy(run_dir / "limit.json", fast / "limit.json")
    assert [p.name for p in write_limit_csv(fast, str(tmp_path / "f"))] == ["f_levels.csv"]
    with pytest.raises(InputError, match="limit"):
        write_limit_csv(tmp_path / "nothing", str(tmp_path / "g"))
