"""SIGTERM on `capplan loadtest` (a CI timeout, Kubernetes, `timeout`) ends the whole process
tree and closes the run, against a real streaming server that counts what it receives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.rundir import read_records, read_run_info, read_stages
from testkit.profiles import make_profile
from testkit.report_inputs import write_fixture
from testkit.stream_server import start_server

pytestmark = pytest.mark.integration

CAPPLAN = str(Path(sys.executable).parent / "capplan")


def _processes_naming(text: str) -> list[int]:
    """Ids of the live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended while we looked
        if text in cmdline:
            found.append(int(entry.name))
    return found


def _wait_for_rows(out: Path, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        parts = out / "records.parts"
        if parts.exists() and any(parts.glob("part-*.msgpack")):
            return
        time.sleep(0.05)
    raise AssertionError(f"no rows were written (exit code {proc.poll()})")


def _start_loadtest(
    url: str, tmp_path: Path, output_tokens: int, out: Path
) -> subprocess.Popen[bytes]:
    """`capplan loadtest` in its own process: 10 req/s for 30 s from a master and 2 workers."""
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, output_tokens)]).to_json())
    cmd = [CAPPLAN, "loadtest", "--host", url, "--model", "m", "--profile", str(profile)]
    cmd += ["--rate", "10", "--duration", "30", "--workers", "2", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_sigterm_stops_every_locust_process_and_closes_the_run(tmp_path: Path) -> None:
    """Would fail if SIGTERM killed capplan alone (its exit status would be -15, the Locust
    master and two workers would go on sending the 30 s plan, and the run would be left
    without stages.json and with `interrupted: false`)."""
    server = start_server(ttft_s=0.05, itl_s=0.05, faults=("ok",))  # /faults: one per request
    out = tmp_path / "run"
    proc = _start_loadtest(server.url, tmp_path, 100, out)  # 5 s streams: some in flight
    try:
        _wait_for_rows(out, proc, 60.0)
        assert len(_processes_naming(str(out))) == 4  # capplan, the master, two workers
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        received = len(server.faults())
        assert _processes_naming(str(out)) == []
        # Nothing is left to send: the count holds while the server is watched for 2 s.
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            assert len(server.faults()) == received
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _processes_naming(str(out)):  # a failed check must not leave load running
            os.kill(pid, signal.SIGKILL)
        server.stop()
    assert proc.returncode == 143, err.decode()
    assert err.decode().rstrip().endswith("interrupted")
    info = read_run_info(out)
    assert info.interrupted and info.ended_at is not None
    records = read_records(out)
    assert records.height > 0 and received <= records.height + 1  # + the preflight's request
    assert "cancelled" in records["error_class"].to_list()  # the streams still in flight
    (stage,) = read_stages(out)
    assert stage.scheduled == records.height
    # The report reads the interrupted run (here with the report fixture's plan and limit).
    fixture = write_fixture(tmp_path / "fixture")
    args = ["report", "--profile", str(fixture.profile), "--run", str(out)]
    args += ["--plan", str(fixture.plan), "--limit", str(fixture.run_dir / "limit.json")]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "baseline.pdf")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "baseline.pdf").stat().st_size > 0


def test_locust_stops_by_itself_when_capplan_is_killed(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, a grace period run out) leaves capplan no time to clean up:
    its Locust master sees itself re-parented and stops the plan, workers included. Would
    fail if the master and workers went on sending the rest of the 30 s plan."""
    server = start_server(ttft_s=0.05, itl_s=0.05, faults=("ok",))
    out = tmp_path / "run"
    proc = _start_loadtest(server.url, tmp_path, 20, out)
    try:
        _wait_for_rows(out, proc, 60.0)
        proc.kill()
        proc.wait(timeout=10)
        end = time.monotonic() + 25.0  # the graceful stop waits for streams in flight
        while _processes_naming(str(out)) and time.monotonic() < end:
            time.sleep(0.2)
        assert _processes_naming(str(out)) == []
        received = len(server.faults())
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            assert len(server.faults()) == received
            time.sleep(0.1)
    finally:
        for pid in _processes_naming(str(out)):  # a failed check must not leave load running
            os.kill(pid, signal.SIGKILL)
        server.stop()
    assert received < 10 * 30  # far from the whole plan
