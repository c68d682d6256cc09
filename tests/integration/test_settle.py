"""A level after one that cancelled requests starts once the server worked them off: against a
slot server that, like llama.cpp, learns of a cancelled request only when a slot starts it
(it writes nothing before the first token, so a request whose client went away holds its
slot for the prefill)."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

from contracts.run import Stage
from contracts.rundir import read_records
from planner.limit.measured.live import run_stage
from planner.limit.measured.settle import target_probe
from planner.loadtest.run import LoadTestConfig
from testkit.profiles import make_profile
from testkit.slot_server import start_slot_server

pytestmark = pytest.mark.integration

PREFILL_S = 0.2


def test_a_level_after_cancelled_requests_waits_for_the_server_to_work_them_off(
    tmp_path: Path,
) -> None:
    # 1 slot of 0.2 s: 30 req/s for 1 s queues about 25, cancelled 0.5 s after the stage
    server = start_slot_server(1, PREFILL_S, 0.002, tokens="2", late_cancel=True)
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(64, 2)]).to_json())
    config = LoadTestConfig(host=server.url, model="m", endpoint="completions",
                            profile_path=str(profile), drain_s=0.5)  # fmt: skip
    out = tmp_path / "run"
    lines: list[str] = []
    try:
        for index, rate in ((1, 30.0), (2, 2.0)):
            stage = Stage(name=f"level-{index:02d}", kind="open", role="level",
                          duration_s=1.0, rate_rps=rate)  # fmt: skip
            run_stage(config, out, stage, seed_index=index, append=index > 1, progress=None,
                      echo=lines.append)  # fmt: skip
        timings = server.timings()
    finally:
        server.stop()
    records = read_records(out)
    first = records.filter(pl.col("stage") == "level-01")
    second = records.filter(pl.col("stage") == "level-02")
    cancelled = first.filter(pl.col("error_class") == "cancelled").height
    assert cancelled >= 10, first["error_class"].value_counts()
    assert len(lines) == 1 and "level-02: waited" in lines[0], lines
    # the server's own account (arrival order): level-01's requests, the probes, level-02's
    backlog_end = max(t.slot_start_s or 0.0 for t in timings[: first.height]) + PREFILL_S
    probes = timings[first.height : len(timings) - second.height]
    level_two = timings[len(timings) - second.height :]
    assert len(probes) >= 2
    assert level_two[0].arrival_s >= backlog_end - 0.05, (level_two[0].arrival_s, backlog_end)
    assert level_two[0].slot_start_s is not None
    assert level_two[0].slot_start_s - level_two[0].arrival_s < 0.05


def test_a_settle_probe_hangs_up_after_its_first_token(tmp_path: Path) -> None:
    # a server that answers 100 tokens of 50 ms whatever max_tokens says (5 s an answer):
    # the probe costs its first token, not the whole answer (the long wall-clock bench waited
    # ~20 s before each level, two whole 10 s answers)
    server = start_slot_server(4, 0.05, 0.05, tokens="100")
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(64, 2)]).to_json())
    config = LoadTestConfig(host=server.url, model="m", endpoint="completions",
                            profile_path=str(profile))  # fmt: skip
    try:
        probe = target_probe(config)
        started = time.monotonic()
        ttft = probe(30.0)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert 0.04 < ttft < 1.0, ttft
    assert took < 2.0, took
