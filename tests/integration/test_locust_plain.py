"""`locust -f locustfiles/llm.py` run directly: -u/-r/-t headless, and the web UI over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from contracts.rundir import read_records, read_run_info, read_stages
from locustfiles.live import JSON_PATH, TAB_KEY
from planner.loadtest.netutil import free_port
from planner.loadtest.remote import locust_command
from testkit.stream_server import ROOT, start_server

pytestmark = pytest.mark.integration


def _locust(url: str, out: Path, *args: str) -> list[str]:
    return locust_command(
        "--host", url, "--llm-model", "m", "--llm-out", str(out), "--llm-drain", "5", *args
    )


def test_headless_users_spawn_rate_and_run_time(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.05, itl_s=0.01, max_out=20)
    out = tmp_path / "run"
    try:
        t0 = time.monotonic()
        proc = subprocess.run(
            _locust(server.url, out, "--headless", "-u", "4", "-r", "4", "-t", "10s"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        wall_s = time.monotonic() - t0
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The issue asks for an end within 15 s (13.7 s measured on the idle box); Locust's own
    # start-up varies on a shared CPU, so the bound that matters is read from the records.
    assert wall_s < 30.0, (wall_s, proc.stderr[-2000:])
    (stage,) = read_stages(out)
    p50 = stage.ttft_s.p50
    print(  # the README's figures for this command (pytest -s)
        f"locust -u 4 -r 4 -t 10s: {wall_s:.1f} s wall, {stage.scheduled} requests, "
        f"{stage.errors} errors, TTFT p50 {p50 * 1e3 if p50 is not None else float('nan'):.0f} ms"
    )
    assert stage.kind == "closed" and stage.target_users == 4
    assert 9.0 <= stage.duration_s <= 10.0  # -t 10s bounds the plan, start delay included
    assert stage.errors == 0 and stage.completed == stage.scheduled
    # 4 loops of ~0.25 s requests (50 ms TTFT + 19 x 10 ms): about 16 req/s
    assert 10.0 <= stage.achieved_rps <= 17.0, stage.achieved_rps
    assert stage.ttft_s.p50 is not None and 0.05 <= stage.ttft_s.p50 <= 0.08
    info = read_run_info(out)
    assert info.run_time_cap_s == 10.0 and info.ended_at is not None and not info.interrupted
    assert info.plan.stages[0].spawn_rate_users_per_s == 4.0
    records = read_records(out)
    assert records.height == stage.scheduled and set(records["stage"]) == {"steady"}
    assert records["end_s"].max() <= 10.0 + 0.5  # type: ignore[operator]  # nothing after -t but the last answers
    assert not (out / "records.parts").exists() and not (out / ".work").exists()


def test_plan_with_run_time_is_capped_and_users_warned(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.02, itl_s=0.005, max_out=8)
    out = tmp_path / "run"
    args = ["--headless", "-t", "4s", "-u", "3", "--llm-plan", "steps", "--llm-rate", "4"]
    args += ["--llm-duration", "3"]
    try:
        proc = subprocess.run(
            _locust(server.url, out, *args), cwd=ROOT, capture_output=True, text=True, timeout=60
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "the plan 'steps'" in proc.stderr  # -u with a plan: warned, naming the plan
    assert "caps the plan 'steps' at 3.5 s" in proc.stderr
    s1, s2 = read_stages(out)
    assert (s1.name, s1.duration_s, s1.planned_duration_s) == ("step1", 3.0, None)
    assert (s2.name, s2.planned_duration_s) == ("step2", 3.0)
    assert abs(s2.duration_s - 0.5) < 1e-9
    assert [s.name for s in read_run_info(out).plan.stages] == ["step1", "step2"]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _post(url: str, form: dict[str, str] | None = None) -> Any:
    data = urllib.parse.urlencode(form or {}).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read())


def _poll(fn: Any, deadline_s: float, what: str) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            value = fn()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_web_ui_swarm_live_tab_and_stop(tmp_path: Path) -> None:
    server = start_server(ttft_s=0.05, itl_s=0.01, max_out=20)
    port = free_port()
    out = tmp_path / "run"
    cmd = _locust(server.url, out, "--web-host", "127.0.0.1", "--web-port", str(port))
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ)
    )
    ui = f"http://127.0.0.1:{port}"
    try:
        _poll(lambda: _get(ui + "/stats/requests"), 30, "the web UI")
        assert _get(ui + JSON_PATH) is None  # no test yet
        started = _post(ui + "/swarm", {"user_count": "3", "spawn_rate": "3", "run_time": "60s"})
        assert started["success"], started

        def stage_with_requests() -> Any:
            view = _get(ui + JSON_PATH)
            if view and view["stages"] and view["stages"][0]["cumulative"]["completed"] >= 10:
                return view
            return None

        view = _poll(stage_with_requests, 30, "completed requests in the capplan view")
        (stage,) = view["stages"]
        assert stage["kind"] == "closed" and stage["target_users"] == 3
        assert stage["state"] == "running" and view["run_dir"] == str(out.resolve())
        cumulative = stage["cumulative"]
        assert cumulative["errors"] == 0
        assert 0.05 <= cumulative["ttft_s"]["p50"] <= 0.08  # the server's 50 ms
        assert 0.009 <= cumulative["itl_s"]["p50"] <= 0.013  # its 10 ms chunks
        assert cumulative["goodput_rps"] == cumulative["achieved_rps"] > 0  # no thresholds
        assert stage["current"]["completed"] > 0
        table = _get(ui + "/stats/requests")["extended_stats"]
        assert table[0]["key"] == TAB_KEY
        assert table[0]["data"][0]["window"] == str(out.resolve())
        assert _post(ui + "/stop")["success"]
        _poll(lambda: (out / "stages.json").exists(), 20, "stages.json after Stop")
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        server.stop()
    (s,) = read_stages(out)
    assert s.completed >= 10 and s.duration_s < 60.0  # Stop ended the 60 s stage early
    assert read_run_info(out).interrupted
    assert read_records(out).height == s.scheduled, err[-2000:]
