"""A level stopped early through the stop file (the limit search's hopeless level) ends in
stages.json where it stopped: its duration and offered rate are what ran, not the planned
900 s (seen on a wall-clock bench: a 2.89 req/s level stopped after 51 s read 159 requests
over 900 s, "offered 0.18 req/s")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from contracts.run import Stage
from contracts.rundir import STOP_FILE, WORK_DIR, read_records, read_stages
from planner.limit.measured.live import run_stage
from planner.loadtest.run import LoadTestConfig
from testkit.profiles import make_profile
from testkit.slot_server import start_slot_server

pytestmark = pytest.mark.integration

RATE = 10.0


def test_a_stage_stopped_by_the_stop_file_ends_where_it_stopped(tmp_path: Path) -> None:
    server = start_slot_server(8, 0.02, 0.002, tokens="4")
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(64, 4)]).to_json())
    config = LoadTestConfig(host=server.url, model="m", endpoint="completions",
                            profile_path=str(profile), drain_s=0.5)  # fmt: skip
    out = tmp_path / "run"
    started: list[float] = []

    def progress(_line: str) -> None:  # stop the level about 3 s in, as the search does
        started.append(time.monotonic())
        if started[-1] - started[0] >= 3.0:
            (out / WORK_DIR / STOP_FILE).touch()

    stage = Stage(name="level-01", kind="open", role="level", duration_s=120.0, rate_rps=RATE)
    try:
        run_stage(config, out, stage, seed_index=1, append=False, progress=progress)
    finally:
        server.stop()
    (summary,) = read_stages(out)
    records = read_records(out)
    assert summary.scheduled == records.height > 0
    assert 2.0 < summary.duration_s < 15.0, summary.duration_s
    assert summary.offered_rps == pytest.approx(RATE, rel=0.35), summary.offered_rps
