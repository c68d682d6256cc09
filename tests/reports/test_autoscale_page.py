"""The autoscaling page shows the study stored in plan.json, in English and Chinese, and is
absent for a plan without one."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from reportlab.platypus import Paragraph, Table

from capplan.commands.autoscale_opts import parse_autoscale
from planner.autoscale.run import study_autoscaling
from reports import words_for
from reports.data import load_inputs
from reports.pages.autoscale import label, page_autoscale
from reports.pages.context import ReportContext
from testkit.report_inputs import write_fixture


def _texts(flowables: list) -> str:
    out = []
    for f in flowables:
        if isinstance(f, Paragraph):
            out.append(f.getPlainText())
        elif isinstance(f, Table):
            out.extend(
                c.getPlainText() if isinstance(c, Paragraph) else str(c)
                for row in f._cellvalues
                for c in row
            )
    return " ".join(out)


@pytest.mark.parametrize(("lang", "heading"), [("en", "Autoscaling"), ("zh", "自动扩缩")])
def test_page_shows_the_study(tmp_path: Path, lang: str, heading: str) -> None:
    paths = write_fixture(tmp_path)
    inputs = load_inputs(paths.profile, paths.run_dir, paths.plan)
    when = datetime(2026, 12, 1, tzinfo=UTC)
    assert page_autoscale(ReportContext(inputs, words_for(lang), when)) == []
    study = study_autoscaling(inputs.profile, inputs.plan, parse_autoscale(None, 240.0, 0))
    plan = inputs.plan.model_copy(update={"autoscale": study})
    ctx = ReportContext(replace(inputs, plan=plan), words_for(lang), when)
    text = _texts(page_autoscale(ctx))
    assert heading in text
    assert "* " + label(ctx, study.recommended) in text
    for o in study.policies:
        assert label(ctx, o.label) in text
    if lang == "zh":
        assert "按时间表" in text and "schedule" not in text
    assert words_for(lang).seconds(240.0) in text
