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


def test_a_plan_made_from_another_limit_is_refused(tmp_path: Path) -> None:
    """The plan's limit must be the run's: a bug hunt reported a plan made from a bare 4.2 req/s
    (SLO ttft only) with a run that found 14.6 under ttft and tpot, and page 1 read "4.2 req/s
    (tpot:p95 binds first)". Another value or another SLO is refused, naming both; the run's
    limit typed rounded (within 1 %) is the same limit."""
    paths = write_fixture(tmp_path)
    plan = load_plan(paths.plan)
    found = json.loads((paths.run_dir / "limit.json").read_text())["feasible_max"]

    def with_limit(**update: object) -> None:
        limit = plan.inputs.limit.model_copy(update=update)
        inputs = plan.inputs.model_copy(update={"limit": limit})
        paths.plan.write_text(
            plan.model_copy(update={"inputs": inputs}).model_dump_json(by_alias=True)
        )

    with_limit(value=round(found * 1.004, 1), source=f"{found * 1.004:.1f}rps", slo=None)
    load_inputs(paths.profile, paths.run_dir, paths.plan)
    with_limit(value=4.2, source="4.2rps", slo=None)
    with pytest.raises(InputError, match=r"plans with a limit of 4\.2 req/s \(4\.2rps\), but"):
        load_inputs(paths.profile, paths.run_dir, paths.plan)
    with_limit(value=found, slo="ttft:p95<=9s")
    with pytest.raises(InputError, match=r"SLO ttft:p95<=9s\), but .* found"):
        load_inputs(paths.profile, paths.run_dir, paths.plan)
