"""`capplan limit`, `loadtest` and `verify` on other hosts for real: the master, two `capplan
worker`s and the target each in a network namespace of their own (tests.helpers.netns), so no
component shares a loopback with another, against one local process on loopback. The limit
searches must both find the slot server's known limit; the load test and the verify must
both hold every request of the seeded schedule, once, with the same lengths, and agree on
the latencies and the verdict (verify's --hosts router then listens on the master's address,
and every request must pass through it).

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

import numpy as np
import pytest

from contracts.limit import load_limit
from contracts.rundir import read_records, read_run_info, read_stages
from locustfiles.arrivals import stage_times
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


LONG = pytest.mark.skipif(
    os.environ.get("CAPPLAN_LONG_TESTS") != "1",
    reason="a load test and a verify, each local and across namespaces, about 4 minutes "
    "(CI's 30-minute budget): CAPPLAN_LONG_TESTS=1",
)
SEED, RATE_RPS = 5, 3.0  # the slot server carries 4 / 0.6 s = 6.7 req/s


def _capplan(*args: str) -> list[str]:
    return [sys.executable, *CLI, *args]


def _run_local(args: list[str], server_url_at: int) -> str:
    """`args` (with `args[server_url_at]` the target's URL, filled here) against a slot server
    on loopback in one local process; returns its output. Exit 1 (verify: did not hold) is
    an answer, anything else a failure."""
    server = start_slot_server(SLOTS, PREFILL_S, PER_TOKEN_S, tokens=TOKENS)
    args = [*args]
    args[server_url_at] = server.url
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _run_namespaced(args: list[str], server_url_at: int) -> str:
    """The same with the server, the master and two workers each in a namespace."""
    net = HostNetwork(("server", "master", "worker1", "worker2")).open()
    try:
        net.run("server", _server_args(net.address["server"]), cwd=REPO)
        net.wait_listening("master", "server", SERVER_PORT, deadline_s=20)
        args = [*args]
        args[server_url_at] = f"http://{net.address['server']}:{SERVER_PORT}"
        bind = f"{net.address['master']}:{MASTER_PORT}"
        args += ["--master-bind", bind, "--expect-workers", "2"]
        master = net.run("master", args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for name in ("worker1", "worker2"):
            net.run(name, _capplan("worker", "--master", bind, "--once"))
        output, _ = master.communicate(timeout=300)
        assert master.returncode in (0, 1), output.decode()[-3000:]
    finally:
        net.close()
    return output.decode()


def _same_requests(local: Path, remote: Path, stages: list[str]) -> None:
    """Both runs hold the same requests of `stages` (id, lengths), each once and answered;
    the remote one's came from both workers."""
    import polars as pl

    columns = ["request_id", "input_tokens", "output_tokens"]
    mine = [read_records(run).filter(pl.col("stage").is_in(stages)) for run in (local, remote)]
    for records in mine:
        assert records["request_id"].n_unique() == records.height > 0
        assert records["ok"].all(), records.filter(~pl.col("ok"))["error_message"].head(3).to_list()
    assert (
        mine[0]
        .select(columns)
        .sort("request_id")
        .equals(mine[1].select(columns).sort("request_id"))
    )
    assert {int(r.split("/")[1]) % 2 for r in mine[1]["request_id"].to_list()} == {0, 1}


@LONG
def test_a_load_test_from_two_namespaced_workers_matches_the_local_one(tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, 8), (64, 4)]).to_json())
    runs = {}
    for where, run in (("local", _run_local), ("netns", _run_namespaced)):
        out = tmp_path / where
        args = _capplan("loadtest", "--host", "URL", "--model", "m", "--profile", str(profile))
        args += ["--rate", f"{RATE_RPS:g}", "--duration", "15", "--stage-plan", "steady"]
        args += ["--seed", str(SEED), "--no-preflight", "--no-metrics", "-o", str(out)]
        run(args, args.index("URL"))
        runs[where] = out
    (local,), (remote,) = read_stages(runs["local"]), read_stages(runs["netns"])
    times = stage_times(
        read_run_info(runs["local"]).plan.stages[0], np.random.default_rng([SEED, 1, 0])
    )
    assert local.scheduled == remote.scheduled == len(times)
    _same_requests(runs["local"], runs["netns"], [local.name])
    info = read_run_info(runs["netns"])
    assert info.master_bind is not None and info.master_bind.startswith("10.200.0.")
    assert info.lost_workers == []
    # Below the server's capacity: TTFT is its 0.1 s to the first token plus little queueing.
    lp50, rp50 = local.ttft_s.p50, remote.ttft_s.p50
    print(f"loadtest TTFT p50: local {lp50:.3f} s, 2 namespaced workers {rp50:.3f} s")
    assert lp50 is not None and rp50 is not None and abs(rp50 - lp50) <= 0.25 * lp50


@LONG
def test_verify_from_two_namespaced_workers_matches_the_local_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from capplan.cli import app
    from contracts.verify import VERIFY_FILE, Verify

    profile, plan = tmp_path / "profile.json", tmp_path / "plan.json"
    profile.write_text(make_profile([(32, 8), (64, 4)], rate_rps=RATE_RPS).to_json())
    made = CliRunner().invoke(
        app,
        ["plan", "--profile", str(profile), "--limit", "5rps", "--peak-rps", f"{RATE_RPS:g}",
         "--slo", "ttft:p95<=2s", "--headroom", "0", "--redundancy", "0", "--no-fleet-check",
         "-o", str(plan)],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    found: dict[str, Verify] = {}
    for where, run in (("local", _run_local), ("netns", _run_namespaced)):
        out = tmp_path / where
        args = _capplan("verify", "--plan", str(plan), "--profile", str(profile), "--hosts")
        args += ["URL", "--model", "m", "--steady-duration", "50", "--burst-duration", "5"]
        args += ["--recovery-timeout", "20", "--seed", str(SEED), "--no-preflight", "-o", str(out)]
        output = run(args, args.index("URL"))
        print(output[-800:])
        found[where] = Verify.model_validate_json((out / VERIFY_FILE).read_text())
        (row,) = found[where].instances
        assert row.source == "router" and row.requests == read_records(out).height
    local, remote = found["local"], found["netns"]
    assert remote.target.startswith("http://10.200.0.")  # the router, on the master's address
    _same_requests(tmp_path / "local", tmp_path / "netns", ["steady", "burst"])
    assert (local.valid, local.held_peak, local.holds) == (
        remote.valid,
        remote.held_peak,
        remote.holds,
    )
    assert local.holds, local.sentence


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
