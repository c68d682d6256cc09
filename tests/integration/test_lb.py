"""`capplan lb`: nginx in front of instances, started and stopped with the launcher.

The verify guide once ran a launcher that, stopped by its PID (SIGTERM), left an orphan nginx
holding the port. Here the launcher is a real `capplan lb` process over a real streaming
server; SIGTERM and SIGKILL of the launcher must both leave no nginx behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from planner.verify.nginx import free_port
from testkit.stream_server import start_server

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _nginx_pids(port: int) -> list[int]:
    """nginx processes whose config listens on `port` (their command line names the conf)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if "nginx" in cmd and "capplan-nginx-" in cmd and "State:\tZ" not in status:
            conf = cmd.split(" -c ", 1)[1].split(" ", 1)[0]
            try:
                if f":{port};" in Path(conf).read_text():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def _launch(port: int, upstream: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "capplan", "lb", "--port", str(port), upstream],
            cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _wait_serving(port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "balancing" in log.read_text():
            try:  # the test server has no /v1/models: its own 404 came through nginx
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
            except urllib.error.HTTPError as err:
                assert err.code == 404, err.code  # not nginx's 502
            return
        time.sleep(0.1)
    raise AssertionError(f"capplan lb did not start:\n{log.read_text()}")


def _gone(port: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _nginx_pids(port):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_stopping_the_launcher_stops_nginx(sig: signal.Signals, tmp_path: Path) -> None:
    server = start_server(ttft_s=0.01, itl_s=0.01)
    port = free_port()
    proc = _launch(port, server.url, tmp_path / "lb.log")
    try:
        _wait_serving(port, tmp_path / "lb.log")
        assert _nginx_pids(port), "nginx is not running under the launcher"
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _gone(port), f"nginx outlived the launcher ({sig.name})"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _nginx_pids(port):
            os.kill(pid, signal.SIGKILL)
        server.stop()


def test_print_config_streams_and_names_every_upstream() -> None:
    result = CliRunner().invoke(
        app,
        ["lb", "--print-config", "--folder", "/srv/lb", "--port", "9000",
         "http://10.0.0.1:8000", "http://10.0.0.2:8000/", "--least-conn"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.output
    assert "server 10.0.0.1:8000 max_fails=0;" in text and "server 10.0.0.2:8000" in text
    assert "proxy_buffering off;" in text and "least_conn;" in text
    assert "listen 127.0.0.1:9000;" in text and "pid /srv/lb/nginx.pid;" in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["10.0.0.1:8000"], "expected a base URL such as http://HOST:PORT"),
        (["http://a:1", "http://a:1/"], "is listed twice"),
        (["--port", "0", "http://a:1"], "--port"),
    ],
)
def test_bad_upstreams_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, ["lb", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
