"""verify.json's sentence from the judged phases (planner.verify.result), in both languages."""

from __future__ import annotations

import polars as pl

from contracts.verify import Phase
from planner.slo.spec import parse_slo
from planner.verify.judge import figures
from planner.verify.result import Judged, verdict_finding
from reports.i18n import Words
from reports.i18n.findings import finding_text


def test_a_steady_stage_whose_warm_up_filled_it_states_no_window_not_zero_percent() -> None:
    """N-1 where the queue kept growing: the warm-up (mean E2Es) took the whole stage, so no
    request was judged (attainment null), and the sentence says so instead of "0.0%"."""
    slo = parse_slo("ttft:p95<=2s")
    sends = [0.5 * k for k in range(240)]
    records = pl.DataFrame(
        {"intended_send_s": sends, "ok": [True] * 240, "ttft_s": [30.0] * 240,
         "e2e_s": [40.0] * 240, "output_tokens": [100] * 240}
    )  # fmt: skip
    none = figures(records, slo, start_s=0.0, duration_s=120.0, warmup_s=120.0)
    assert none.requests == 0 and none.attainment is None
    steady = Phase(name="steady", role="steady", rate_rps=8.19, duration_s=120.0,
                   warmup_s=120.0, measured=none, simulated=none)  # fmt: skip
    judged = Judged(phases=[steady], state=None, invalid_reason=None, recovery_s=None,
                    recovery_simulated_s=None, held_peak=False, held_burst=False,
                    recovered=False)  # fmt: skip
    finding = verdict_finding(judged, serving=1, planned=2, slo=slo, rate_rps=8.19, burst_s=10)
    english = finding.english()
    assert english.startswith("n=1 of 2 planned instances reached no steady window at the "
                              "design peak of 8.19 req/s")  # fmt: skip
    assert "(120 s) filled the whole 120 s stage" in english and "%" not in english
    chinese = finding_text(Words("zh"), finding, english)
    assert "未进入稳态窗口" in chinese and "%" not in chinese
