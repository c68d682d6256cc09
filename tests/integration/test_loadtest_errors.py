"""HTTP error answers and cut streams, from a real server, keep their status, class and message."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from contracts.run import Stage, StagePlan
from contracts.rundir import read_records, read_stages
from planner.emulator import running_emulator
from planner.emulator.server import Faults
from planner.engine import build_engine_config
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile
from testkit.stream_server import fault_message, start_server

pytestmark = pytest.mark.integration

FAULTS = ("ok", "429", "500", "503", "cut", "400")
# What each server action must read as in records.parquet: (status_code, error_class).
EXPECTED = {
    "ok": (200, None),
    "429": (429, "refused"),
    "500": (500, "server_error"),
    "503": (503, "refused"),
    "400": (400, "client_error"),
    "cut": (200, "disconnect"),
}
WITHHELD = "(message withheld: it quotes the request)"


def _profile(tmp_path: Path, pairs: list[tuple[int, int]]) -> str:
    path = tmp_path / "profile.json"
    path.write_text(make_profile(pairs).to_json())
    return str(path)


def test_each_row_carries_the_servers_status_class_and_message(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.01, itl_s=0.005, faults=FAULTS)
    out = tmp_path / "run"
    try:
        plan = StagePlan(
            stages=[Stage(name="f", duration_s=3.0, rate_rps=12.0, arrival="constant")]
        )
        config = LoadTestConfig(
            host=server.url, model="m", profile_path=_profile(tmp_path, [(48, 12)]), drain_s=5.0
        )
        (s,) = run_loadtest(config, plan, out)
        taken = server.faults()
    finally:
        server.stop()
    records = read_records(out)
    assert records.height == len(taken) == s.scheduled == 36
    # Every row reads as one of the server's actions, as many times as the server took it.
    seen = Counter(
        zip(records["status_code"].to_list(), records["error_class"].to_list(), strict=True)
    )
    assert seen == Counter(EXPECTED[a] for a in taken)
    for row in records.iter_rows(named=True):
        status, cls, message = row["status_code"], row["error_class"], row["error_message"]
        if cls is None:
            assert row["ok"] and message is None
            continue
        assert not row["ok"]
        if status in (429, 500):
            assert message == fault_message(status)
        elif status == 503:  # a plain-text body is kept as text
            assert message == f"{fault_message(503)}: service unavailable"
        elif status == 400:  # the server quoted the prompt: never recorded
            assert message == WITHHELD
        else:  # cut after two chunks: the TTFT it showed is kept, the E2E is not
            assert cls == "disconnect" and message
            assert row["ttft_s"] is not None and row["e2e_s"] is None
    (stage,) = read_stages(out)
    counts = Counter(EXPECTED[a][1] for a in taken if a != "ok")
    assert stage.errors_by_class == dict(counts)
    assert stage.error_messages["server_error"] == fault_message(500)
    assert stage.error_messages["client_error"] == WITHHELD
    assert stage.errors_by_class.keys() >= {"refused", "server_error", "client_error"}
    # The 400 answers quoted the prompt: no text file of the run holds the quote either
    # (Locust's failure table in locust.log included).
    for path in (out / "locust.log", out / "stages.json", out / "run.json"):
        assert "cannot parse" not in path.read_text(errors="replace"), path
    assert "cannot parse" not in " ".join(records["error_message"].drop_nulls().to_list())


def test_emulator_refusals_and_injected_errors_are_named(tmp_path: Path) -> None:
    """`--error-rate` answers 500 and `--reject-when-waiting 2` answers 429 while two requests
    wait: a short burst against a small batch makes both show up."""
    config = build_engine_config("H100-80GB", "llama-3.1-8b", max_num_seqs=4)
    faults = Faults(error_rate=0.2, reject_when_waiting=2)
    plan = StagePlan(stages=[Stage(name="b", duration_s=2.0, rate_rps=40.0, arrival="constant")])
    with running_emulator(config, faults=faults, seed=1) as url:
        load = LoadTestConfig(
            host=url,
            model="llama-3.1-8b",
            profile_path=_profile(tmp_path, [(256, 64)]),
            drain_s=10.0,
        )
        (s,) = run_loadtest(load, plan, tmp_path / "run")
    records = read_records(tmp_path / "run")
    failed = records.filter(~pl.col("ok"))
    pairs = set(zip(failed["status_code"].to_list(), failed["error_class"].to_list(), strict=True))
    assert pairs == {(429, "refused"), (500, "server_error")}, pairs
    assert s.error_messages == {
        "refused": "injected fault: too many requests waiting",
        "server_error": "injected fault: internal error",
    }
    assert s.errors == failed.height and s.completed > 0


def test_a_stage_too_large_to_schedule_is_refused_before_the_run(tmp_path: Path) -> None:
    """1,000 req/s for 1e9 s: the driver drew 1e12 send times, failed with a MemoryError
    inside Locust, and `capplan loadtest` exited 0 with an empty run. It is now refused
    up front, naming the stage."""
    from contracts.errors import ConfigError
    from locustfiles.stages import MAX_STAGE_REQUESTS, MAX_STAGE_USERS, validate_plan

    huge = StagePlan(stages=[Stage(name="soak", duration_s=1e9, rate_rps=1000.0)])
    with pytest.raises(ConfigError, match=r"stages\[0\] \('soak'\) schedules 1,000,000,000,000"):
        validate_plan(huge)
    many = StagePlan(stages=[Stage(name="n", duration_s=1.0, requests=MAX_STAGE_REQUESTS + 1)])
    with pytest.raises(ConfigError, match="requests: 20000001"):
        validate_plan(many)
    closed = Stage(name="c", kind="closed", duration_s=5.0, users=MAX_STAGE_USERS + 1)
    with pytest.raises(ConfigError, match="runs 100,001 users; at most 100,000"):
        validate_plan(StagePlan(stages=[closed]))  # it spawned a greenlet per user: OOM
    validate_plan(StagePlan(stages=[Stage(name="ok", duration_s=86400.0, rate_rps=200.0)]))


def test_a_load_generator_that_fails_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the driver inside Locust raises, it leaves `.work/driver_error.json` (locustfiles/
    llm.py) and the run ends with RunError naming the failure, after writing its directory;
    the run ended with exit 0 and an empty run. Here a real run against a real server, whose
    Locust process's failure is written where the driver writes it (a stage too large to draw
    set it off, which the plan check now refuses on both sides: checked by hand with the
    check lifted, `capplan loadtest --rate 1000 --duration 1e9` exits 1 with "the load
    generator failed: MemoryError: Unable to allocate 7.28 TiB ...")."""
    from contracts.errors import RunError
    from contracts.rundir import DRIVER_ERROR_FILE, WORK_DIR
    from planner.loadtest import run as run_module

    real = run_module.run_locust

    def failing(*args: object, **kwargs: object) -> tuple[bool, int]:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        error = {"error": "MemoryError: Unable to allocate 7.28 TiB"}
        (out / WORK_DIR / DRIVER_ERROR_FILE).write_text(json.dumps(error))
        return result

    monkeypatch.setattr(run_module, "run_locust", failing)
    server = start_server(ttft_s=0.01, itl_s=0.005)
    out = tmp_path / "run"
    plan = StagePlan(stages=[Stage(name="s", duration_s=1.0, rate_rps=4.0)])
    config = LoadTestConfig(
        host=server.url, model="m", profile_path=_profile(tmp_path, [(48, 12)]), drain_s=2.0
    )
    try:
        with pytest.raises(RunError, match="the load generator failed: MemoryError"):
            run_loadtest(config, plan, out)
    finally:
        server.stop()
    assert read_records(out).height == 4  # every scheduled request kept its row
    assert not (out / WORK_DIR).exists()
