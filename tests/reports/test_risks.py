"""Page 1's risks are read from the data and ordered worst first."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from reports.data import load_inputs
from reports.i18n import Words
from reports.pages.context import ReportContext
from reports.pages.risks import risk_items
from testkit.report_inputs import build_plan, write_fixture


def _risks(tmp_path: Path, kv_headroom: float) -> list[tuple[str, str, str]]:
    paths = write_fixture(tmp_path)
    plan = build_plan()
    memory = plan.resources.gpu_memory.model_copy(update={"kv_headroom_frac": kv_headroom})
    resources = plan.resources.model_copy(update={"gpu_memory": memory})
    paths.plan.write_text(
        plan.model_copy(update={"resources": resources}).model_dump_json(by_alias=True)
    )
    inputs = load_inputs(paths.profile, paths.run_dir, paths.plan)
    return risk_items(ReportContext(inputs, Words("en"), datetime(2026, 1, 1, tzinfo=UTC)))


def test_kv_cache_that_does_not_fit_is_the_first_risk(tmp_path: Path) -> None:
    risks = _risks(tmp_path, kv_headroom=-0.3)
    assert [title for _, title, _ in risks][0] == "KV-cache headroom"
    assert risks[0][0] == "high"
    assert "requests will queue or be preempted" in risks[0][2]


def test_burst_that_recovers_quickly_is_low(tmp_path: Path) -> None:
    risks = {title: (level, text) for level, title, text in _risks(tmp_path, kv_headroom=0.6)}
    level, text = risks["Burst recovery"]
    assert level == "low" and "took 18.5 s" in text  # under RECOVERY_WATCH_S (20 s)
    assert risks["Growth beyond the plan"][0] == "medium"
