"""A limit found by the fast search reads as such on the limit page: its interval, how it was
found, the model's prediction and bias, in English and Chinese (not "nothing above failed",
which the measured search's open bracket says)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contracts.limit import FastSearchRecord
from reports import words_for
from reports.data import load_inputs
from reports.pages.context import ReportContext
from reports.pages.limit import limit_evidence, limit_sentence
from testkit.report_inputs import write_fixture


@pytest.mark.parametrize(("lang", "found"), [("en", "fast search"), ("zh", "快速搜索")])
def test_a_fast_limit_says_how_it_was_found(tmp_path: Path, lang: str, found: str) -> None:
    paths = write_fixture(tmp_path)
    inputs = load_inputs(paths.profile, paths.run_dir, paths.plan)
    fast = FastSearchRecord(
        stopped="converged", adequate=True, characterise_s=55.0, confirm_s=120.0,
        predicted_rps=9.38, limit_rps=9.2, interval=(8.94, 9.47),
        bias={"ttft:p95": 0.002}, levels=[(9.38, 1, 171), (9.38, 2, 382)],
    )  # fmt: skip
    limit = inputs.limit.model_copy(
        update={"method": "fast", "fast": fast, "feasible_max": 9.2, "infeasible_min": None}
    )
    when = datetime(2026, 12, 1, tzinfo=UTC)
    ctx = ReportContext(replace(inputs, limit=limit), words_for(lang), when)
    sentence = limit_sentence(ctx)
    assert found in sentence and "8.94" in sentence and "9.47" in sentence
    evidence = " ".join(limit_evidence(ctx))
    assert "9.38" in evidence and "+0.002" in evidence
    # control: the same limit from the measured search's open bracket reads otherwise
    measured = replace(inputs, limit=limit.model_copy(update={"method": "measured", "fast": None}))
    other = ReportContext(measured, words_for(lang), when)
    assert found not in limit_sentence(other)
