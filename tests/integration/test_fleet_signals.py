"""Ctrl-C on `capplan plan`'s process group, or SIGTERM on its main process alone, ends the
plan within seconds while its fleet check runs on local worker processes, and leaves none of
its processes behind (planner.fleet.executor.stop_local)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from profiles.model import save_profile
from profiles.presets import preset_profile

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# Before the fix the plan ran on for as long as its running points took (23 to 48 s here).
EXIT_WITHIN_S = 10.0


def _start_plan(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A fleet check of about a million requests (a minute and more on two workers)."""
    profile = tmp_path / "big.json"
    save_profile(preset_profile("chat", rate_rps=400.0), profile)
    cmd = [sys.executable, "-m", "capplan", "plan", "--profile", str(profile)]
    cmd += ["--limit", "4rps", "--slo", "ttft:p95<=2s", "--fleet-full"]
    cmd += ["-o", str(tmp_path / "plan.json")]
    env = dict(os.environ, PYTHONPATH=str(REPO), CAPPLAN_FLEET_WORKERS="2")
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )


def _busy_workers(proc: subprocess.Popen[bytes], deadline_s: float) -> list[psutil.Process]:
    """The plan's child processes, once both workers have simulated for a second."""
    main = psutil.Process(proc.pid)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        children = main.children(recursive=True)
        workers = [c for c in children if "spawn_main" in " ".join(_cmdline(c))]
        if len(workers) == 2 and all(_cpu_s(w) >= 1.0 for w in workers):
            return children
        time.sleep(0.05)
    raise AssertionError(f"the workers did not start (exit code {proc.poll()})")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _cpu_s(process: psutil.Process) -> float:
    try:
        return float(process.cpu_times().user)
    except psutil.Error:
        return 0.0


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(
    ("whom", "signum", "code"),
    [("group", signal.SIGINT, 130), ("main", signal.SIGTERM, 143)],
    ids=["ctrl-c-on-the-group", "sigterm-on-main"],
)
def test_a_signal_ends_the_plan_and_its_workers_at_once(
    tmp_path: Path, whom: str, signum: int, code: int
) -> None:
    """Would fail with the pool shut down by `shutdown(wait=True)`: the plan went on until its
    running points ended (SIGTERM: minutes, the workers orphaned by a later SIGKILL)."""
    proc = _start_plan(tmp_path)
    children: list[psutil.Process] = []
    try:
        children = _busy_workers(proc, 60.0)
        if whom == "group":
            os.killpg(proc.pid, signum)  # Ctrl-C in a terminal
        else:
            proc.send_signal(signum)  # systemd, Kubernetes
        _, err = proc.communicate(timeout=EXIT_WITHIN_S)
        assert proc.returncode == code, err.decode()
        assert "interrupted" in err.decode()
        end = time.monotonic() + EXIT_WITHIN_S
        while time.monotonic() < end and any(_alive(c) for c in children):
            time.sleep(0.05)
        assert [c.pid for c in children if _alive(c)] == []
    finally:
        # The children first: they hold the plan's stdout and stderr open.
        for child in children:
            if _alive(child):
                child.kill()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
