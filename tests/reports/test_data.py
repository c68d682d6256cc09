"""The report's loaders: validation messages that name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from contracts.errors import InputError
from reports.data import load_inputs, load_plan
from testkit.report_inputs import write_fixture


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
