"""The run directory's one owner: files written and read back, unmerged parts, bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from contracts.errors import InputError
from contracts.run import RECORD_COLUMNS, RunInfo, Stage, StagePlan
from contracts.rundir import (
    METRICS_PARTS,
    RECORD_NAMES,
    RECORDS_FILE,
    RECORDS_PARTS,
    STAGES_FILE,
    consolidate_run,
    holds_records,
    metrics_writer,
    read_records,
    read_run_info,
    read_server_metrics,
    read_stages,
    records_writer,
    write_run_info,
    write_stages,
)
from locustfiles.summary import summarize_plan

PLAN = StagePlan(stages=[Stage(name="a", duration_s=4.0, rate_rps=2.0)])


def _row(i: int, *, ok: bool = True) -> tuple[Any, ...]:
    t = 0.5 * i
    values: dict[str, Any] = dict.fromkeys(RECORD_NAMES)
    values.update(
        stage="a",
        request_id=f"a/{i}",
        intended_send_s=t,
        sent_s=t + 0.001,
        end_s=t + 0.3,
        schedule_lag_s=0.001,
        input_tokens=7,
        tokens_estimated=False,
        ok=ok,
        status_code=200 if ok else 503,
        itl_gaps_s=[0.02] * 9 if ok else [],
    )
    if ok:
        values.update(
            first_token_s=t + 0.1,
            ttft_s=0.099,
            tpot_s=0.02,
            itl_mean_s=0.02,
            itl_max_s=0.02,
            e2e_s=0.299,
            output_tokens=10,
        )
    else:
        values.update(error_class="refused", error_message="busy")
    return tuple(values[name] for name in RECORD_NAMES)


def _write_parts(run_dir: Path, rows: list[tuple[Any, ...]], per_part: int) -> None:
    writer = records_writer(run_dir)
    for k in range(0, len(rows), per_part):
        writer.write(rows[k : k + per_part])


def _info() -> RunInfo:
    return RunInfo.model_validate(
        {
            "name": "r",
            "command": ["capplan", "loadtest"],
            "capplan_version": "0",
            "host": "http://127.0.0.1:1",
            "model": "m",
            "endpoint": "chat",
            "profile_source": "preset:chat",
            "profile_digest": "d",
            "seed": 3,
            "plan": PLAN,
            "started_at": "2026-01-01T00:00:00+00:00",
        }
    )


def test_a_run_written_and_read_back_is_the_same(tmp_path: Path) -> None:
    rows = [_row(i, ok=i % 4 != 3) for i in range(8)]
    _write_parts(tmp_path, rows, per_part=3)
    metrics_writer(tmp_path).write([(0.0, "vllm:num_requests_waiting", "", "gauge", 2.0)])
    consolidate_run(tmp_path)
    assert not (tmp_path / RECORDS_PARTS).exists() and not (tmp_path / METRICS_PARTS).exists()
    records = read_records(tmp_path)
    assert records.rows() == [
        tuple(r) for r in pl.DataFrame([list(r) for r in rows], RECORD_COLUMNS, orient="row").rows()
    ]
    assert read_server_metrics(tmp_path)["value"].to_list() == [2.0]
    info = _info()
    write_run_info(tmp_path, info)
    assert read_run_info(tmp_path) == info
    stages = summarize_plan(records, PLAN, 0.0)
    write_stages(tmp_path, stages)
    assert read_stages(tmp_path) == stages
    assert stages[0].scheduled == 8 and stages[0].errors == 2


def test_a_run_with_unmerged_parts_reads_as_after_consolidation(tmp_path: Path) -> None:
    rows = [_row(i, ok=i != 5) for i in range(10)]
    # a run that crashed after its first consolidation: a Parquet file and parts after it
    _write_parts(tmp_path, rows[:4], per_part=2)
    consolidate_run(tmp_path)
    _write_parts(tmp_path, rows[4:], per_part=4)
    assert (tmp_path / RECORDS_FILE).exists() and holds_records(tmp_path)
    before = read_records(tmp_path)
    consolidate_run(tmp_path)
    after = read_records(tmp_path)
    assert before.height == 10 and before.equals(after)
    assert after["request_id"].to_list() == [f"a/{i}" for i in range(10)]


def test_an_empty_run_directory_reads_as_no_rows_and_no_stages(tmp_path: Path) -> None:
    assert read_records(tmp_path).height == 0 and not holds_records(tmp_path)
    assert list(read_records(tmp_path).columns) == list(RECORD_COLUMNS)
    assert read_stages(tmp_path) == []
    with pytest.raises(InputError, match=r"stages\.json: stages not found"):
        read_stages(tmp_path, required=True)
    with pytest.raises(InputError, match=r"not a capplan run directory"):
        read_run_info(tmp_path)


def test_bad_files_are_named_with_the_field(tmp_path: Path) -> None:
    pl.DataFrame({"stage": ["a"], "ttft": [0.1]}).write_parquet(tmp_path / RECORDS_FILE)
    with pytest.raises(InputError, match=r"records\.parquet: missing column\(s\) request_id"):
        read_records(tmp_path)
    (tmp_path / STAGES_FILE).write_text(json.dumps([{"name": "a"}]))
    with pytest.raises(InputError, match=r"stages\.json: stage 0: field kind"):
        read_stages(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"schema": "capplan.run/1", "name": "r"}))
    with pytest.raises(InputError, match=r"run\.json: field command"):
        read_run_info(tmp_path)
