"""Load from workers on "other hosts": `capplan worker` processes joining `--master-bind`
over loopback, the master owning plan, schedule and records; one worker killed mid-stage."""

from __future__ import annotations

import contextlib
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

from contracts.limit import load_limit
from contracts.run import Stage, StagePlan, StageSummary
from contracts.rundir import read_records, read_run_info, read_stages
from contracts.verify import Verify
from locustfiles.arrivals import arrival_times
from planner.loadtest.run import LoadTestConfig, run_loadtest
from testkit.profiles import make_profile
from testkit.stream_server import start_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_WORKERS = 3


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(port: int) -> subprocess.Popen[bytes]:
    code = "import sys; from capplan.cli import app; sys.exit(app())"
    args = [sys.executable, "-c", code, "worker", "--master", f"127.0.0.1:{port}", "--once"]
    # Its own session: killing it kills the Locust worker it runs, as a host going down would.
    return subprocess.Popen(args, start_new_session=True)


def _run(
    tmp_path: Path, plan: StagePlan, seed: int, during: object = None, ttft_s: float = 0.01
) -> tuple[list[StageSummary], list[subprocess.Popen[bytes]], Path]:
    """Run `plan` with a master on 127.0.0.1 and three `capplan worker` processes; `during`
    (out_dir, workers) runs in this thread while the load test runs."""
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, 8), (64, 4)]).to_json())
    port = _free_port()
    server = start_server(ttft_s=ttft_s, itl_s=0.002)
    out = tmp_path / "run"
    cfg = LoadTestConfig(
        host=server.url,
        model="m",
        profile_path=str(profile),
        drain_s=3.0,
        seed=seed,
        master_bind=f"127.0.0.1:{port}",
        expect_workers=N_WORKERS,
        workers_wait_s=120.0,
    )
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["summaries"] = run_loadtest(cfg, plan, out)
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
            result["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    workers = [_worker(port) for _ in range(N_WORKERS)]
    try:
        if callable(during):
            during(out, workers)
        thread.join(timeout=240)
        deadline = time.monotonic() + 30  # workers leave once the master quits (slow when busy)
        for w in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        server.stop()
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
            w.wait()
    assert not thread.is_alive()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["summaries"], workers, out  # type: ignore[return-value]


def _kill_one_at(elapsed_s: float) -> object:
    """A `during` that SIGKILLs the first worker once the plan is `elapsed_s` in."""

    def kill_one(out: Path, workers: list[subprocess.Popen[bytes]]) -> None:
        deadline = time.monotonic() + 120
        live = out / ".work" / "live.json"
        while time.monotonic() < deadline:
            try:
                if json.loads(live.read_text()).get("elapsed_s", 0.0) > elapsed_s:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("the run did not start")
        os.killpg(workers[0].pid, signal.SIGKILL)

    return kill_one


def test_three_remote_workers_give_the_asked_poisson_process(tmp_path: Path) -> None:
    rate, duration = 40.0, 12.0
    plan = StagePlan(stages=[Stage(name="p", duration_s=duration, rate_rps=rate)])
    (s,), workers, out = _run(tmp_path, plan, seed=11)
    assert all(w.returncode == 0 for w in workers)  # each left after the master's run
    records = read_records(out)
    n = len(arrival_times("poisson", rate, duration, np.random.default_rng([11, 1, 0])))
    # Every scheduled request exactly once: no duplicates, no gaps.
    assert records.height == s.scheduled == n
    assert sorted(records["request_id"].to_list()) == sorted(f"p/{j}" for j in range(n))
    assert s.errors == 0
    assert abs(s.achieved_rps / rate - 1) <= 0.03, s.achieved_rps
    sent = np.sort(records["sent_s"].to_numpy())
    gaps = np.diff(sent)
    cv = float(np.std(gaps) / np.mean(gaps))
    lag_p99 = s.schedule_lag_s.p99
    print(  # the README's figures for this run (pytest -s)
        f"3 remote workers, Poisson {rate:g} req/s for {duration:g} s: {n} scheduled, "
        f"{records.height} rows, {records['request_id'].n_unique()} ids, achieved "
        f"{s.achieved_rps:.2f} req/s, CV {cv:.3f}, lag p99 "
        f"{lag_p99 * 1e3 if lag_p99 is not None else float('nan'):.0f} ms"
    )
    assert abs(cv - 1.0) <= 0.10, cv  # Poisson: inter-arrival CV 1
    assert s.schedule_lag_s.p99 is not None and s.schedule_lag_s.p99 < 0.05
    info = read_run_info(out)
    assert info.workers == N_WORKERS and info.master_bind is not None
    assert info.lost_workers == []


def test_a_worker_killed_mid_stage_is_reported_and_its_requests_counted_lost(
    tmp_path: Path,
) -> None:
    rate, duration = 30.0, 14.0
    plan = StagePlan(stages=[Stage(name="k", duration_s=duration, rate_rps=rate)])

    (s,), _, out = _run(tmp_path, plan, seed=4, during=_kill_one_at(4.0))
    records = read_records(out)
    n = len(arrival_times("poisson", rate, duration, np.random.default_rng([4, 1, 0])))
    assert records.height == s.scheduled == n  # still one row per scheduled request
    assert records["request_id"].n_unique() == n
    (lost,) = read_run_info(out).lost_workers
    print(  # the README's figures for this run (pytest -s)
        f"worker killed 4 s in: noticed {lost.lost_at_s - s.start_s:.1f} s into the stage, "
        f"{lost.lost_requests} lost rows, {records.height} rows for {n} scheduled"
    )
    # Killed 4 s into the plan, noticed within Locust's heartbeat liveness (about 3 s).
    assert lost.of == N_WORKERS and 4.0 < lost.lost_at_s - s.start_s < duration
    lost_rows = records.filter(pl.col("error_class") == "lost")
    assert lost_rows.height == lost.lost_requests > 0
    # The lost rows are the killed worker's share of the schedule, and only its share.
    numbers = [int(r.split("/")[1]) for r in lost_rows["request_id"].to_list()]
    assert {j % N_WORKERS for j in numbers} == {lost.slot - 1}
    # Roughly its share of the arrivals after it died (it may have lost in-flight ones too).
    assert lost_rows.height >= 0.5 * (rate / N_WORKERS) * (duration - 5.0)
    (stage,) = read_stages(out)
    assert stage.errors_by_class.get("lost") == lost.lost_requests
    assert stage.validity is not None
    assert any("lost with a load-generating worker" in w for w in stage.validity.warnings)
    assert "was lost at" in (out / "locust.log").read_text()


def test_a_worker_killed_in_a_closed_loop_stage_leaves_its_in_flight_requests_as_lost(
    tmp_path: Path,
) -> None:
    """Closed loop has no schedule to recompute: the killed worker's requests in flight at its
    last report (every user of it holds one; each lasts about 0.6 s here) become `lost` rows."""
    users, duration = 6, 10.0
    plan = StagePlan(stages=[Stage(name="c", kind="closed", users=users, duration_s=duration)])
    (s,), _, out = _run(tmp_path, plan, seed=5, during=_kill_one_at(4.0), ttft_s=0.6)
    records = read_records(out)
    assert records["request_id"].n_unique() == records.height == s.scheduled
    (lost,) = read_run_info(out).lost_workers
    lost_rows = records.filter(pl.col("error_class") == "lost")
    assert lost_rows.height == lost.lost_requests
    # Slot k of 3 runs users k, k + 3 (2 of the 6) and numbers its requests k, k + 3, ...
    numbers = [int(r.split("/")[1]) for r in lost_rows["request_id"].to_list()]
    assert {j % N_WORKERS for j in numbers} == {lost.slot - 1}
    assert 1 <= lost_rows.height <= 2 * (users // N_WORKERS)
    assert (lost_rows["intended_send_s"] < lost.lost_at_s).all()
    # Nothing the killed worker reported is lost, nothing it lost is also recorded.
    mine = records.filter(
        pl.col("request_id").str.split("/").list.get(1).cast(pl.Int64) % N_WORKERS == lost.slot - 1
    )
    assert mine.filter(pl.col("error_class") != "lost")["ok"].all()
    (stage,) = read_stages(out)
    assert stage.errors_by_class.get("lost") == lost.lost_requests


def test_limit_runs_its_levels_on_remote_workers(tmp_path: Path) -> None:
    """`capplan limit --master-bind --expect-workers 2` with two `capplan worker` processes
    (they rejoin for each level): every level's requests are recorded, none lost."""
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, 8), (64, 4)]).to_json())
    port = _free_port()
    server = start_server(ttft_s=0.02, itl_s=0.002)
    out = tmp_path / "limit"
    code = "import sys; from capplan.cli import app; sys.exit(app())"
    limit_args = [sys.executable, "-c", code, "limit", "--host", server.url, "--model", "m"]
    # A lax SLO (the schedule-lag bound is a tenth of it): both levels pass on a busy box.
    limit_args += ["--profile", str(profile), "--slo", "ttft:p95<=5s", "--start", "4"]
    limit_args += ["--max", "8", "--max-levels", "2", "--level-duration", "2", "--warmup", "0.5"]
    limit_args += ["--level-requests", "8", "--min-completed", "5", "-o", str(out)]
    limit_args += ["--effective-requests", "0", "--tail-requests", "0"]  # short fixed levels
    limit_args += ["--master-bind", f"127.0.0.1:{port}", "--expect-workers", "2"]
    limit_args += ["--method", "measured"]  # two fixed levels, each a Locust run on the workers
    master = subprocess.Popen(limit_args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        code_w = "import sys; from capplan.cli import app; sys.exit(app())"
        for _ in range(2):  # without --once: each rejoins the next level's master
            args = [sys.executable, "-c", code_w, "worker", "--master", f"127.0.0.1:{port}"]
            workers.append(subprocess.Popen(args, start_new_session=True))
        output, _ = master.communicate(timeout=150)
    finally:
        server.stop()
        if master.poll() is None:
            master.kill()
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
            w.wait()
    assert master.returncode == 0, output.decode()[-3000:]
    limit = load_limit(out)
    print(output.decode()[-2000:])
    assert [lv.load for lv in limit.levels] == [4, 8] and limit.feasible_max == 8
    records = read_records(out)
    stages = {s.name: s for s in read_stages(out)}
    for level in limit.levels:
        assert level.stages
        for name in level.stages:
            mine = records.filter(pl.col("stage") == name)
            assert mine.height == stages[name].scheduled > 0, name
            assert mine["request_id"].n_unique() == mine.height
            # both workers sent load: slot k of 2 numbers its arrivals k, k + 2, ...
            numbers = {int(r.split("/")[1]) % 2 for r in mine["request_id"].to_list()}
            assert numbers == {0, 1}, name
    assert (records["error_class"] != "lost").all() and read_run_info(out).lost_workers == []


def _verify_plan(tmp_path: Path) -> tuple[Path, Path]:
    """A one-instance plan (limit 10 req/s, peak 6 req/s) and the profile it was made on."""
    from typer.testing import CliRunner

    from capplan.cli import app

    profile, plan = tmp_path / "profile.json", tmp_path / "plan.json"
    profile.write_text(make_profile([(32, 8), (64, 4)], rate_rps=3.0).to_json())
    made = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "10rps", "--peak-rps", "6", "--slo",
         "ttft:p95<=5s", "--headroom", "0", "--redundancy", "0", "--no-fleet-check",
         "-o", str(plan)],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    return plan, profile


def test_verify_takes_its_load_from_remote_workers(tmp_path: Path) -> None:
    """`capplan verify --hosts URL --master-bind --expect-workers 2` (run_verify, in a thread
    here) with two `capplan worker --once`: the steady and burst stages hold every request of
    the seeded schedule, once, from both workers, and every request reached the instance
    through capplan's router (its count per instance is verify.json's; a worker that kept or
    rewrote the target bypasses it)."""
    from locustfiles.arrivals import stage_times
    from planner.verify import VerifyOptions, run_verify

    plan, profile = _verify_plan(tmp_path)
    port, out = _free_port(), tmp_path / "verify"
    server = start_server(ttft_s=0.01, itl_s=0.002)
    options = VerifyOptions(
        plan_path=plan, profile_path=profile, out_dir=out, hosts=[server.url], model="m",
        steady_s=3.0, burst_s=1.0, recovery_s=1.0, seed=3, preflight=False,
        master_bind=f"127.0.0.1:{port}", expect_workers=2,
    )  # fmt: skip
    lines: list[str] = []
    result: dict[str, object] = {}

    def master() -> None:
        try:
            result["verify"] = run_verify(options, echo=lines.append)
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
            result["error"] = err

    thread = threading.Thread(target=master)
    thread.start()
    workers = [_worker(port) for _ in range(2)]
    try:
        thread.join(timeout=150)
    finally:
        server.stop()
        for w in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.wait(timeout=30)
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
            w.wait()
    print("\n".join(lines))
    assert not thread.is_alive()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    assert f"waiting for 2 workers on 127.0.0.1:{port} ..." in lines
    verify = result["verify"]
    assert isinstance(verify, Verify)
    records = read_records(out)
    assert records["request_id"].n_unique() == records.height
    for i, stage in enumerate(verify.stages.stages[:2]):  # recovery may end early
        times = stage_times(stage, np.random.default_rng([3, 1, i]))
        mine = records.filter(pl.col("stage") == stage.name)
        assert sorted(mine["request_id"].to_list()) == sorted(
            f"{stage.name}/{j}" for j in range(len(times))
        ), stage.name
        assert {int(r.split("/")[1]) % 2 for r in mine["request_id"].to_list()} == {0, 1}
    assert records["ok"].all(), records.filter(~pl.col("ok"))["error_message"].head(3).to_list()
    (row,) = verify.instances
    assert row.source == "router" and row.requests == records.height, (row, records.height)
    assert read_run_info(out).master_bind == f"127.0.0.1:{port}"
