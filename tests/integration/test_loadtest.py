"""Real Locust runs against a real streaming server on 127.0.0.1 (short stages)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from contracts.run import Stage, StagePlan
from contracts.rundir import read_records, read_run_info, read_stages
from locustfiles.arrivals import arrival_times
from locustfiles.replay import read_log_table, slice_log
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile
from testkit.stream_server import start_server
from tests.helpers.missing import missing
from tests.helpers.shared_data import AZURE_CONV

pytestmark = pytest.mark.integration

AZURE = AZURE_CONV


def _profile(tmp_path: Path, pairs: list[tuple[int, int]]) -> str:
    path = tmp_path / "profile.json"
    path.write_text(make_profile(pairs).to_json())
    return str(path)


def _config(url: str, profile: str, **kw: object) -> LoadTestConfig:
    return LoadTestConfig(host=url, model="m", profile_path=profile, drain_s=5.0, **kw)  # type: ignore[arg-type]


def _fifty_streams(run_dir: Path) -> tuple[float, float]:
    """One 4 s run of 50 closed-loop users: the client's TTFT and TPOT p50 less the server's
    own (its logged timings), after the checks every run must pass."""
    server = start_server(ttft_s=0.1, itl_s=0.04)
    pairs = [(64, 9), (64, 13), (64, 17), (64, 21)]  # unequal lengths keep the 50 loops out of step
    run_dir.mkdir()
    try:
        plan = StagePlan(stages=[Stage(name="c50", kind="closed", duration_s=4.0, users=50)])
        (s,) = run_loadtest(_config(server.url, _profile(run_dir, pairs)), plan, run_dir / "run")
        own = server.timings()
    finally:
        server.stop()
    assert s.errors == 0 and s.completed >= 50
    assert s.mean_in_flight is not None and s.mean_in_flight > 40
    assert s.ttft_s.p50 is not None and s.tpot_s.p50 is not None
    assert not s.tokens_estimated
    records = read_records(run_dir / "run")
    assert set(records["output_tokens"].unique().to_list()) <= {9, 13, 17, 21}
    own_ttft = float(np.median([t["ttft_s"] for t in own]))
    own_tpot = float(np.median([t["tpot_s"] for t in own]))
    return s.ttft_s.p50 - own_ttft, s.tpot_s.p50 - own_tpot


def test_ttft_and_tpot_match_the_servers_own_at_50_streams(tmp_path: Path) -> None:
    # Within 3 ms on a quiet machine (the README's figures, pytest -s). In CI the other lane
    # keeps both cores busy and one run in several read TTFT 4 ms late (2026-12-06): a run
    # gets a second try, so a bias of the client's own (late in both) still fails.
    tries = []
    for attempt in range(2):
        ttft_gap, tpot_gap = _fifty_streams(tmp_path / f"try{attempt}")
        tries.append((ttft_gap, tpot_gap))
        print(  # the README's timing-accuracy figures (pytest -s)
            f"50 streams, test server: TTFT p50 {ttft_gap * 1e3:+.1f} ms, "
            f"TPOT p50 {tpot_gap * 1e3:+.1f} ms against the server's own"
        )
        if abs(ttft_gap) <= 0.003 and abs(tpot_gap) <= 0.003:
            return
    pytest.fail(f"client p50 - server's own (TTFT, TPOT) in seconds, two runs: {tries}")


def test_poisson_20rps_for_20s_achieves_the_rate(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.01, itl_s=0.002)
    try:
        plan = StagePlan(
            stages=[Stage(name="p20", duration_s=20.0, rate_rps=20.0, arrival="poisson")]
        )
        cfg = _config(server.url, _profile(tmp_path, [(32, 8)]), seed=3)
        (s,) = run_loadtest(cfg, plan, tmp_path / "run")
    finally:
        server.stop()
    scheduled = len(arrival_times("poisson", 20.0, 20.0, np.random.default_rng([3, 1, 0])))
    assert s.scheduled == scheduled and s.errors == 0
    assert abs(s.offered_rps / 20.0 - 1) <= 0.03
    assert abs(s.achieved_rps / 20.0 - 1) <= 0.03
    assert s.schedule_lag_s.p50 is not None and s.schedule_lag_s.p50 < 0.005
    info = read_run_info(tmp_path / "run")
    assert info.plan == plan and info.ended_at is not None
    assert (tmp_path / "run" / "server_metrics.parquet").exists()
    assert s.server.get("test_requests_total:rate_per_s", 0) == pytest.approx(20, rel=0.25)


def test_gamma_stage_shows_the_requested_cv(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.005, itl_s=0.001)
    try:
        plan = StagePlan(
            stages=[Stage(name="g", duration_s=8.0, rate_rps=100.0, arrival="gamma:0.5")]
        )
        run_loadtest(_config(server.url, _profile(tmp_path, [(16, 4)])), plan, tmp_path / "run")
    finally:
        server.stop()
    records = read_records(tmp_path / "run").sort("intended_send_s")
    scheduled = np.diff(records["intended_send_s"].to_numpy())
    assert len(scheduled) == 799
    # CV = 1/sqrt(0.5); the sample CV of 800 gamma(0.5) gaps has a standard error near 6 %.
    assert abs(scheduled.std() / scheduled.mean() / np.sqrt(2.0) - 1) < 0.15
    # The sends follow that schedule: typical gaps within 2 ms of the scheduled ones (a
    # stall of the shared CI box can still move a few sends, so the tail is not asserted).
    sent = np.diff(records["sent_s"].to_numpy())
    assert np.median(np.abs(sent - scheduled)) < 0.002
    assert abs(sent.std() / sent.mean() / np.sqrt(2.0) - 1) < 0.3


def test_replay_at_10x_reproduces_inter_arrivals(tmp_path: Path) -> None:
    if not AZURE.is_file():
        missing(f"shared traces not found at {AZURE.parent} (beside the checkout)")
    server = start_server(ttft_s=0.005, itl_s=0.001, max_out=8)
    try:
        plan = StagePlan(
            stages=[Stage(name="replay", role="replay", duration_s=6.0, arrival="replay")]
        )
        cfg = _config(
            server.url,
            _profile(tmp_path, [(16, 4)]),
            replay_path=str(AZURE),
            replay_speed=10.0,
            replay_start_s=600.0,
        )
        run_loadtest(cfg, plan, tmp_path / "run")
    finally:
        server.stop()
    log = slice_log(read_log_table(AZURE), 600.0, 60.0)
    want = np.diff(log["arrival_s"].to_numpy()) / 10.0
    records = read_records(tmp_path / "run")
    records = records.with_columns(
        pl.col("request_id").str.split("/").list.get(1).cast(pl.Int64).alias("i")
    ).sort("i")
    got = np.diff(records["sent_s"].to_numpy())
    assert len(got) == len(want) > 100
    error = np.abs(got - want)
    # Within 5 ms; a shared 2-core CI box can stall a rare send, so the bound is on p95.
    assert np.percentile(error, 95) <= 0.005, np.percentile(error, [50, 95, 100])
    assert np.median(error) <= 0.001
    # The log's own lengths are sent.
    assert records["input_tokens"].to_list() == log["input_tokens"].to_list()


def test_server_killed_mid_stage_every_request_has_a_row(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.05, itl_s=0.02)
    out = tmp_path / "run"

    def kill_when_running() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            live = out / ".work" / "live.json"
            if live.exists() and json.loads(live.read_text()).get("elapsed_s", 0) > 1.5:
                server.stop()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        plan = StagePlan(
            stages=[Stage(name="k", duration_s=3.0, rate_rps=20.0, arrival="constant")]
        )
        (s,) = run_loadtest(_config(server.url, _profile(tmp_path, [(32, 40)]), seed=1), plan, out)
    finally:
        killer.join()
        server.stop()
    records = read_records(out)
    assert records.height == 60 == s.scheduled
    assert records["request_id"].n_unique() == 60
    assert 0 < s.completed < 60
    classes = set(s.errors_by_class)
    assert classes and classes <= {"disconnect", "connect_refused", "empty"}
    assert "connect_refused" in classes  # requests sent after the kill
    assert sum(s.errors_by_class.values()) == s.errors == 60 - s.completed


def test_sigint_keeps_the_rows_so_far(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.05, itl_s=0.05)
    out = tmp_path / "run"
    cmd = [
        str(Path(sys.executable).parent / "capplan"),
        "loadtest",
        "--host",
        server.url,
        "--model",
        "m",
        "--profile",
        _profile(tmp_path, [(32, 100)]),
        "--rate",
        "10",
        "--duration",
        "30",
        "-o",
        str(out),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(Path.cwd())),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = (
                list((out / "records.parts").glob("part-*.msgpack"))
                if (out / "records.parts").exists()
                else []
            )
            if parts:
                break
            time.sleep(0.05)
        assert parts, "no rows were written"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert proc.returncode == 130, err
    records = read_records(out)
    assert (out / "records.parquet").exists() and records.height > 0
    assert "cancelled" in records["error_class"].to_list()  # the 5 s streams still in flight
    assert read_run_info(out).interrupted
    (stage,) = read_stages(out)
    assert stage.scheduled == records.height


@pytest.mark.slow
def test_two_workers_merge_into_one_records_file(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.01, itl_s=0.002)
    try:
        plan = StagePlan(
            stages=[
                Stage(name="a", duration_s=2.0, rate_rps=30.0, arrival="constant"),
                Stage(name="b", duration_s=2.0, rate_rps=15.0, arrival="poisson"),
            ]
        )
        cfg = _config(server.url, _profile(tmp_path, [(16, 8), (64, 4)]), workers=2, seed=5)
        a, b = run_loadtest(cfg, plan, tmp_path / "run")
    finally:
        server.stop()
    records = read_records(tmp_path / "run")
    n_b = len(arrival_times("poisson", 15.0, 2.0, np.random.default_rng([5, 1, 1])))
    assert records.height == 60 + n_b == a.scheduled + b.scheduled
    assert records["request_id"].n_unique() == records.height
    assert a.errors == b.errors == 0
    assert sorted(records.filter(pl.col("stage") == "a")["request_id"]) == sorted(
        f"a/{i}" for i in range(60)
    )
    assert len(list((tmp_path / "run").glob("*.parts"))) == 0


def test_cli_steady_run_prints_the_stage_table(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from capplan.cli import app

    server = start_server(ttft_s=0.01, itl_s=0.002)
    try:
        result = CliRunner().invoke(
            app,
            [
                "loadtest",
                "--host",
                server.url,
                "--model",
                "m",
                "--profile",
                _profile(tmp_path, [(32, 8)]),
                "--rate",
                "10",
                "--duration",
                "2",
                "--arrival",
                "constant",
                "-o",
                str(tmp_path / "run"),
            ],
        )
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert "steady" in result.output and "TTFT" in result.output
    for name in ("run.json", "records.parquet", "stages.json", "server_metrics.parquet"):
        assert (tmp_path / "run" / name).exists(), name
    (stage,) = read_stages(tmp_path / "run")
    assert stage.scheduled == 20 and stage.completed == 20
    assert read_run_info(tmp_path / "run").profile_source.endswith("profile.json")


def test_client_concurrency_cap_holds_and_shows_as_schedule_lag(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.1, itl_s=0.01)
    try:
        plan = StagePlan(
            stages=[Stage(name="cap", duration_s=2.0, rate_rps=20.0, arrival="constant")]
        )
        cfg = _config(server.url, _profile(tmp_path, [(16, 5)]), max_concurrency=2)
        (s,) = run_loadtest(cfg, plan, tmp_path / "run")
    finally:
        server.stop()
    records = read_records(tmp_path / "run")
    assert s.completed == 40 and read_run_info(tmp_path / "run").client_concurrency_cap == 2
    # Never more than 2 requests between send and end at once.
    events = sorted(
        [(t, 1) for t in records["sent_s"].to_list()]
        + [(t, -1) for t in records["end_s"].to_list()],
        key=lambda e: (e[0], e[1]),
    )
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak <= 2
    # 20 req/s of ~0.15 s requests need ~3 in flight: the cap delays sends, and says so.
    assert s.schedule_lag_s.max is not None and s.schedule_lag_s.max > 0.2


def test_workers_auto_splits_a_peak_above_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from capplan.cli import app
    from planner.loadtest.workers import ProcessCapacity, save_capacity

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    save_capacity(ProcessCapacity(rate_rps=25.0, cpus=2, source="test: 25 req/s a process"))
    server = start_server(ttft_s=0.01, itl_s=0.002)
    out = tmp_path / "run"
    try:
        args = ["loadtest", "--host", server.url, "--model", "m"]
        args += ["--profile", _profile(tmp_path, [(32, 8)]), "--rate", "40"]
        args += ["--arrival", "constant", "--duration", "4", "--workers", "auto", "-o", str(out)]
        result = CliRunner().invoke(app, args)
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert "--workers auto: peak 40 req/s: 2 local workers" in result.output
    assert read_run_info(out).workers == 2
    records = read_records(out)
    (s,) = read_stages(out)
    assert records.height == s.scheduled == 160  # 40 req/s x 4 s, constant arrivals
    assert abs(s.offered_rps / 40.0 - 1) <= 0.03 and s.errors == 0


def test_stages_are_judged_under_the_slo_as_given_success_only_included(tmp_path: Path) -> None:
    """The SLO reaches the load test as a `Slo`: it was once passed as text and parsed again,
    which dropped --success-only, so stages.json was judged without it."""
    from planner.slo.spec import parse_slo

    server = start_server(ttft_s=0.02, itl_s=0.01)
    slo = parse_slo("ttft:p95<=1s", success_only=True)
    try:
        plan = StagePlan(stages=[Stage(name="s", kind="open", duration_s=2.0, rate_rps=5.0)])
        run_loadtest(_config(server.url, _profile(tmp_path, [(32, 4)]), slo=slo), plan, tmp_path)
    finally:
        server.stop()
    (stage,) = read_stages(tmp_path)
    assert stage.slo == "ttft:p95<=1s" and stage.success_only
    assert stage.attainment is not None and stage.attainment > 0.9
