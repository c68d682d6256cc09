"""The emulator as target: measured TTFT and TPOT agree with the engine's own timelines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contracts.run import Stage, StagePlan
from contracts.rundir import read_records
from planner.engine import build_engine_config
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile
from tests.helpers.emulator_timings import emulator_with_timings

pytestmark = pytest.mark.integration


def test_ttft_and_tpot_match_the_emulators_own_at_50_streams(tmp_path: Path) -> None:
    config = build_engine_config("H100-80GB", "llama-3.1-8b")
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(256, 16), (512, 24), (128, 20)]).to_json())
    plan = StagePlan(stages=[Stage(name="c50", kind="closed", duration_s=4.0, users=50)])
    with emulator_with_timings(config.model_dump_json(), tmp_path) as (url, timings_file):
        (s,) = run_loadtest(
            LoadTestConfig(host=url, model="llama-3.1-8b", profile_path=str(profile), drain_s=5),
            plan,
            tmp_path / "run",
        )
    own = json.loads(timings_file.read_text())
    assert s.errors == 0 and s.completed == len(own) >= 50
    assert s.mean_in_flight is not None and s.mean_in_flight > 40
    own_ttft = float(np.median([t["ttft_s"] for t in own]))
    own_tpot = float(np.median([t["tpot_s"] for t in own if t["tpot_s"] is not None]))
    assert s.ttft_s.p50 is not None and s.tpot_s.p50 is not None
    print(  # the README's timing-accuracy figures (pytest -s)
        f"50 streams, emulator: TTFT p50 {(s.ttft_s.p50 - own_ttft) * 1e3:+.1f} ms, "
        f"TPOT p50 {(s.tpot_s.p50 - own_tpot) * 1e3:+.1f} ms against the emulator's own"
    )
    assert abs(s.tpot_s.p50 - own_tpot) <= 0.003, (s.tpot_s.p50, own_tpot)
    # The engine's own TTFT starts when the emulator's handler receives the request and ends
    # at the step's end in engine time; the client also sees its own send, the socket, and
    # the emulator's wake-up writing the chunk. With both on the 2-core box the gap measured
    # 3.2-5.1 ms over three runs (it was 8 ms before arrival was stamped at receipt); on
    # 2026-12-02, a slower day of the same machine, 6.2-9.6 ms over six runs (with the
    # emulator's prompt encoder before and after it got faster alike), so the bound is 12 ms
    # here against 3 ms for testkit/stream_server.py, whose own timings are stamped at the
    # socket writes.
    assert own_ttft <= s.ttft_s.p50 <= own_ttft + 0.012, (s.ttft_s.p50, own_ttft)
    assert not read_records(tmp_path / "run")["tokens_estimated"].any()
