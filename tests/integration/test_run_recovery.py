"""A real burst against a slot server: the recovery stored in stages.json, the timeline the
report draws and each stage's goodput and attainment agree with the records."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from contracts.run import Stage, StagePlan
from contracts.rundir import read_records, read_stages
from contracts.timeline import run_timeline
from planner.loadtest.run import LoadTestConfig, run_loadtest
from planner.slo.spec import parse_slo
from testkit.profiles import make_profile
from testkit.slot_server import start_slot_server

pytestmark = pytest.mark.integration

THRESHOLD_S = 0.5


def test_burst_recovery_timeline_and_goodput_agree(tmp_path: Path) -> None:
    # 4 slots of 0.15 s (27 req/s): 8 req/s is easy, a 60 req/s burst queues up to 30
    # requests and refuses the rest (HTTP 429), which count as +inf in the rolling p95 until
    # they leave its 10 s window (11.2 s after the burst in the run that set these lengths).
    server = start_slot_server(4, 0.05, 0.02, tokens="5", refuse_above=30)
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(64, 5)]).to_json())
    plan = StagePlan(
        name="sbr",
        stages=[
            Stage(name="steady", role="steady", duration_s=4.0, rate_rps=8.0),
            Stage(name="burst", role="burst", duration_s=2.0, rate_rps=60.0),
            Stage(name="recovery", role="recovery", duration_s=16.0, rate_rps=8.0),
        ],
    )
    config = LoadTestConfig(
        host=server.url,
        model="m",
        profile_path=str(profile),
        drain_s=5.0,
        slo_ttft_s=THRESHOLD_S,
        slo=parse_slo("attainment>=90%:ttft<=500ms"),
    )
    run_dir = tmp_path / "run"
    try:
        returned = run_loadtest(config, plan, run_dir)
    finally:
        server.stop()
    stages = read_stages(run_dir)
    assert stages == returned
    steady, burst, recovery = stages
    assert burst.errors_by_class.get("refused", 0) > 0, burst.errors_by_class
    curve = recovery.recovery_curve
    assert curve is not None and curve.threshold_s == THRESHOLD_S
    assert recovery.recovered and recovery.recovery_s == curve.recovery_s
    assert recovery.recovery_s is not None and 1.0 <= recovery.recovery_s <= 16.0, (
        recovery.recovery_s
    )

    # The load-test page's TTFT timeline is the stored curve at whole seconds, so it shows
    # recovery within a second of the stated time, never before it.
    timeline = run_timeline(run_dir, stages)
    assert timeline is not None
    stored = dict(zip(curve.t_s, curve.ttft_p95_s, strict=True))
    drawn = dict(
        zip(
            timeline.ttft_p95_rolling_s.x.tolist(),
            timeline.ttft_p95_rolling_s.y.tolist(),
            strict=True,
        )
    )
    shared = [t for t in drawn if t in stored]
    assert len(shared) >= 10
    assert all(stored[t] == pytest.approx(drawn[t]) for t in shared)
    back = min(t for t, y in drawn.items() if t >= burst.end_s and y <= THRESHOLD_S)
    stated = burst.end_s + recovery.recovery_s
    assert stated - 1e-9 <= back <= stated + 1.0

    # Goodput and attainment: every scheduled request counts, a good one succeeded with a
    # TTFT within 500 ms (inclusive); nothing was still running when the run ended.
    records = read_records(run_dir)
    assert records.filter(pl.col("error_class") == "cancelled").height == 0
    for stage in stages:
        rows = records.filter(pl.col("stage") == stage.name)
        good = rows.filter(pl.col("ok") & (pl.col("ttft_s") <= THRESHOLD_S)).height
        assert stage.slo == "attainment>=90%:ttft<=500ms"
        assert stage.attainment == pytest.approx(good / rows.height)
        assert stage.goodput_rps == pytest.approx(good / stage.duration_s)
    assert burst.attainment is not None and steady.attainment is not None
    assert burst.attainment < steady.attainment
