"""Pages draw no empty axes: a chart without data becomes one line saying why (workload, limit)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from reportlab.graphics.shapes import Drawing
from reportlab.platypus import Paragraph

from reports import words_for
from reports.data import ReportInputs, load_inputs
from reports.layout import NoChart
from reports.pages.context import ReportContext
from reports.pages.limit import chart_attainment, chart_limit
from reports.pages.workload import chart_hours, chart_prefix
from testkit.report_inputs import FixturePaths, write_fixture


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> FixturePaths:
    return write_fixture(tmp_path_factory.mktemp("workload"))


def _context(inputs: ReportInputs, lang: str = "en") -> ReportContext:
    return ReportContext(inputs, words_for(lang), datetime(2026, 11, 29, tzinfo=UTC))


def _without(inputs: ReportInputs, **arrivals: object) -> ReportInputs:
    """The inputs with a profile of no prefix data and the given arrival fields replaced."""
    profile = inputs.profile
    changed = profile.model_copy(
        update={
            "arrivals": profile.arrivals.model_copy(update=arrivals),
            "prefix": profile.prefix.model_copy(update={"available": False, "lru_hit_ratio": []}),
        }
    )
    return replace(inputs, profile=changed)


def _lines(ctx: ReportContext, charts: list[Drawing | NoChart]) -> list[str]:
    flowables = ctx.chart_row(charts)
    assert not [f for f in flowables if not isinstance(f, Paragraph)], "an axis was drawn"
    return [f.getPlainText() for f in flowables if isinstance(f, Paragraph)]


def test_charts_with_data_are_drawn_side_by_side(paths: FixturePaths) -> None:
    ctx = _context(load_inputs(paths.profile, paths.run_dir, paths.plan))
    charts = [chart_hours(ctx), chart_prefix(ctx)]
    assert all(isinstance(c, Drawing) for c in charts)
    assert len(ctx.chart_row(charts)) == 1


def test_a_log_shorter_than_a_day_and_without_prefix_data_draws_no_axis(
    paths: FixturePaths,
) -> None:
    short = _without(
        load_inputs(paths.profile, paths.run_dir, paths.plan), duration_s=3600.0, hour_of_day=None
    )
    ctx = _context(short)
    assert _lines(ctx, [chart_hours(ctx), chart_prefix(ctx)]) == [
        "Hour-of-day shape: not drawn, the log spans 60 min, less than a day.",
        "Prefix reuse against cache size: not drawn, no prefix data in the log.",
    ]
    zh = _context(short, "zh")
    assert _lines(zh, [chart_hours(zh)]) == [
        "按小时的日内分布:未绘制,日志时间跨度为 60 min,不足一天。"
    ]


def test_a_day_long_log_without_clock_times_says_so(paths: FixturePaths) -> None:
    inputs = _without(load_inputs(paths.profile, paths.run_dir, paths.plan), hour_of_day=None)
    ctx = _context(inputs)
    assert _lines(ctx, [chart_hours(ctx)]) == [
        "Hour-of-day shape: not drawn, the log has no wall-clock times."
    ]


def test_a_limit_without_measured_levels_draws_no_axis(paths: FixturePaths) -> None:
    inputs = load_inputs(paths.profile, paths.run_dir, paths.plan)
    given = replace(inputs, limit=inputs.limit.model_copy(update={"levels": []}))
    ctx = _context(given)
    lines = _lines(ctx, [chart_limit(ctx), chart_attainment(ctx)])
    assert [line.split(": not drawn, ")[1] for line in lines] == [
        "the limit file holds no measured load level.",
        "the limit file holds no measured load level.",
    ]
    unjudged = [lv.model_copy(update={"attainment": None}) for lv in inputs.limit.levels]
    ctx = _context(replace(inputs, limit=inputs.limit.model_copy(update={"levels": unjudged})))
    assert isinstance(chart_limit(ctx), Drawing)
    assert _lines(ctx, [chart_attainment(ctx)]) == [
        "SLO attainment against load: not drawn, no load level recorded its attainment."
    ]
