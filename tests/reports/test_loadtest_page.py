"""The load-test page's stage table shows each stage's SLO attainment once stages.json has it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from contracts.rundir import read_records, read_stages, write_stages
from planner.loadtest.run import judge_stages
from planner.slo.spec import parse_slo
from reports import words_for
from reports.data import load_inputs
from reports.pages.context import ReportContext
from reports.pages.loadtest import stage_table
from testkit.report_inputs import FixturePaths, write_fixture


def _cells(paths: FixturePaths) -> list[list[str]]:
    """The stage table's cell texts."""
    inputs = load_inputs(paths.profile, paths.run_dir, paths.plan)
    ctx = ReportContext(inputs, words_for("en"), datetime(2026, 11, 29, tzinfo=UTC))
    return [[getattr(c, "text", str(c)) for c in row] for row in stage_table(ctx)._cellvalues]


def test_stage_table_adds_attainment_when_stages_were_judged(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    plain = _cells(paths)
    assert "Attainment" not in plain[0]
    stages = read_stages(paths.run_dir)
    judged = judge_stages(read_records(paths.run_dir), stages, parse_slo("ttft:p95<=2s"))
    write_stages(paths.run_dir, judged)
    cells = _cells(paths)
    assert cells[0] == [*plain[0], "Attainment"]
    for row, before, stage in zip(cells[1:], plain[1:], judged, strict=True):
        assert stage.attainment is not None and 0.0 < stage.attainment <= 1.0
        assert row == [*before, f"{stage.attainment * 100:.1f} %"]
