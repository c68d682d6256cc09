"""`capplan limit` on other hosts for real: the master, two `capplan worker`s and the target
each in a network namespace of their own (tests.helpers.netns), so no component shares a
loopback with another, against one local process on loopback; both must find the slot
server's known limit.

The target is the slot server with 4 slots and a fixed service time (0.1 s to the first
token, 25 tokens at 20 ms: 0.6 s). In closed loop with N users and zero think time, up to 4
users never wait (TTFT 0.1 s plus the client's overhead); with 5 one request always waits
for a slot, on average a quarter of the service time (0.15 s), so that more than 8 % of
requests wait over 0.1 s (mean wait <= P(wait > 0.1) * 0.6 + 0.1). Under `ttft:p95<=0.2s`
the limit is therefore exactly 4 users, whatever the box's noise within 0.1 s.
Needs root and iproute2 (`ip netns`): it fails, not skips, where namespaces cannot be made.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.limit import load_limit
from contracts.rundir import read_records, read_run_info, read_stages
from testkit.profiles import make_profile
from testkit.slot_server import start_slot_server
from tests.helpers.netns import HostNetwork

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOTS, PREFILL_S, PER_TOKEN_S, TOKENS = 4, 0.1, 0.02, "25"
SERVER_PORT, MASTER_PORT = 8000, 5557
REPO = Path(__file__).resolve().parents[2]  # `python -m testkit.slot_server` runs from here
CLI = ["-c", "import sys; from capplan.cli import app; sys.exit(app())"]


def _limit_args(host_url: str, profile: Path, out: Path) -> list[str]:
    args = [sys.executable, *CLI, "limit", "--host", host_url, "--model", "m"]
    args += ["--profile", str(profile), "--slo", "ttft:p95<=0.2s", "--dimension", "concurrency"]
    args += ["--method", "measured", "--start", "2", "--max", "8", "--max-levels", "8"]
    args += ["--level-duration", "3", "--warmup", "1", "--level-requests", "15"]
    args += ["--min-completed", "10", "--effective-requests", "0", "--tail-requests", "0"]
    return [*args, "--no-preflight", "-o", str(out)]


def _server_args(host: str) -> list[str]:
    args = [sys.executable, "-m", "testkit.slot_server", "--host", host, "--port"]
    args += [str(SERVER_PORT), "--slots", str(SLOTS), "--prefill", str(PREFILL_S)]
    return [*args, "--per-token", str(PER_TOKEN_S), "--tokens", TOKENS]


def _local(tmp_path: Path, profile: Path) -> Path:
    """The limit from one local process (Locust in the master's process) on loopback."""
    out = tmp_path / "local"
    server = start_slot_server(SLOTS, PREFILL_S, PER_TOKEN_S, tokens=TOKENS)
    try:
        done = subprocess.run(
            _limit_args(server.url, profile, out), capture_output=True, text=True, timeout=240
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _distributed(tmp_path: Path, profile: Path) -> tuple[Path, str]:
    """The limit with master, two workers and the server each in its own namespace."""
    out = tmp_path / "netns"
    net = HostNetwork(("server", "master", "worker1", "worker2")).open()
    try:
        net.run("server", _server_args(net.address["server"]), cwd=REPO)
        net.wait_listening("master", "server", SERVER_PORT, deadline_s=20)
        url = f"http://{net.address['server']}:{SERVER_PORT}"
        bind = f"{net.address['master']}:{MASTER_PORT}"
        args = [*_limit_args(url, profile, out), "--master-bind", bind, "--expect-workers", "2"]
        master = net.run("master", args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for name in ("worker1", "worker2"):  # without --once: each rejoins every level
            net.run(name, [sys.executable, *CLI, "worker", "--master", bind])
        output, _ = master.communicate(timeout=300)
        assert master.returncode == 0, output.decode()[-3000:]
    finally:
        net.close()
    return out, output.decode()


@pytest.mark.skipif(
    os.environ.get("CAPPLAN_LONG_TESTS") != "1",
    reason="two limit searches, about 2 minutes (CI's 30-minute budget): CAPPLAN_LONG_TESTS=1",
)
def test_two_workers_in_their_own_namespaces_find_the_local_limit(tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, 8), (64, 4)]).to_json())
    local = load_limit(_local(tmp_path, profile))
    out, output = _distributed(tmp_path, profile)
    remote = load_limit(out)
    print(output[-1500:])
    print(
        f"limit: local {local.feasible_max} users ({len(local.levels)} levels), "
        f"2 workers in namespaces {remote.feasible_max} users ({len(remote.levels)} levels)"
    )
    # The truth (4 slots, see the module docstring), the same answer both ways.
    assert local.feasible_max == remote.feasible_max == SLOTS
    assert local.infeasible_min == remote.infeasible_min == SLOTS + 1
    info = read_run_info(out)
    assert info.master_bind is not None and info.master_bind.startswith("10.200.0.")
    assert info.lost_workers == []
    # Every level's load came from both workers, over the namespaces' bridge.
    records, stages = read_records(out), {s.name: s for s in read_stages(out)}
    for level in remote.levels:
        for name in level.stages:
            mine = records.filter(records["stage"] == name)
            assert mine.height == stages[name].scheduled > 0, name
            assert {int(r.split("/")[1]) % 2 for r in mine["request_id"].to_list()} == {0, 1}


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}


def test_hosts_that_cannot_be_made_fail_and_leave_no_namespace_behind() -> None:
    """A setup that fails half way (a second host of the same name) raises, never skips, and
    removes the namespaces it had made; a closed network leaves none either."""
    before = _namespaces()
    with pytest.raises(RuntimeError, match="netns add"):
        HostNetwork(("a", "b", "a")).open()
    assert _namespaces() == before
    net = HostNetwork(("a", "b")).open()
    assert {net.ns("hub"), net.ns("a"), net.ns("b")} <= _namespaces()
    net.close()
    assert _namespaces() == before
