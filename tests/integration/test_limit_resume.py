"""SIGTERM to `capplan limit` mid-level leaves a resumable run directory, and
`capplan limit --resume RUN_DIR` finishes the same search without measuring a finished level
again, against the emulator; the progress lines reach a pipe as each level ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from contracts.limit import load_limit
from contracts.rundir import read_records, read_run_info, read_work_json
from contracts.searchlog import read_search_log
from planner.emulator import emulator_subprocess
from profiles.model import save_profile
from testkit.profiles import make_profile
from tests.integration.test_limit_emulator import _engine

pytestmark = pytest.mark.integration

CAPPLAN = str(Path(sys.executable).parent / "capplan")
SPEED = 8.0


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with emulator_subprocess(_engine(), speed=SPEED) as url:
        yield url


def _start(url: str, profile: Path, out: Path) -> subprocess.Popen[str]:
    """`capplan limit` with short levels, its output to a pipe."""
    cmd = [CAPPLAN, "limit", "--host", url, "--model", "llama-3.1-8b", "--profile", str(profile)]
    # three short levels (2, 4 and 8 req/s; 32-token answers take ~0.1 s at SPEED)
    cmd += ["--slo", "ttft:p95<=250ms", "--start", "2", "--arrival", "constant"]
    cmd += ["--level-duration", "2", "--warmup", "0.5", "--level-requests", "10"]
    cmd += ["--effective-requests", "0", "--tail-requests", "0", "--max-level-duration", "8"]
    cmd += ["--max-levels", "3", "--no-preflight", "--method", "measured", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _first_level_line(proc: subprocess.Popen[str]) -> str:
    """The first progress line, read from the pipe while the command still runs."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("run  1"):
            assert proc.poll() is None  # it came as the level ended, not at exit
            return line
    raise AssertionError(f"no level line (exit {proc.wait()}): {proc.stderr.read()}")  # type: ignore[union-attr]


def _wait_for_stage(out: Path, stage: str, proc: subprocess.Popen[str], deadline_s: float) -> None:
    """Until the load test writes progress for `stage` and has rows of it."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and proc.poll() is None:
        live = read_work_json(out, "live.json")
        if isinstance(live, dict) and live.get("stage") == stage:
            rows = read_records(out).filter(pl.col("stage") == stage)
            if rows.height >= 3:
                return
        time.sleep(0.05)
    raise AssertionError(f"{stage} never ran (exit {proc.poll()})")


def test_sigterm_mid_level_then_resume_repeats_no_finished_level(
    emulator: str, tmp_path: Path
) -> None:
    profile = tmp_path / "fixed.json"
    save_profile(make_profile([(256, 32)]), profile)
    out = tmp_path / "run"
    proc = _start(emulator, profile, out)
    try:
        line = _first_level_line(proc)
        assert "elapsed " in line and " left " in line
        _wait_for_stage(out, "level-02", proc, 60.0)
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    log = read_search_log(out)
    assert [s.stage for s in log.steps] == ["level-01"] and not log.finished
    stopped_rows = read_records(out).filter(pl.col("stage") == "level-02").height
    assert stopped_rows > 0 and read_run_info(out).interrupted
    # the interrupted search's limit (unconfirmed) is the emulator's: marked predicted, as a
    # finished one is (it was written unmarked: the mark came only after a finished search)
    interrupted = load_limit(out)
    assert interrupted.feasible_max is not None and interrupted.predicted is not None
    assert "predicted, not measured on a GPU" in rest + err

    resumed = subprocess.run(
        [CAPPLAN, "limit", "--resume", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(Path.cwd())),
    )
    print(resumed.stdout)
    assert resumed.returncode == 0, resumed.stderr
    assert "level-02 stopped mid-way: run again from the start" in resumed.stdout
    lines = [ln for ln in resumed.stdout.splitlines() if ln.startswith("run ")]
    assert lines[0].startswith("run  1") and lines[0].endswith("(recorded)")
    assert not any(ln.endswith("(recorded)") for ln in lines[1:])
    log = read_search_log(out)
    stages = [s.stage for s in log.steps]
    assert log.finished and log.discarded == ["level-02"]
    assert stages[0] == "level-01" and "level-02" not in stages
    asked = {s.name: s.rate_rps for s in read_run_info(out).plan.stages}
    assert stages[1] == "level-03" and asked["level-03"] == asked["level-02"]  # from its start
    assert len(set(stages)) == len(stages)  # no stage measured twice
    limit = load_limit(out)
    judged = [st for lv in limit.levels for st in lv.stages]
    assert sorted(judged) == sorted(stages) and "level-02" not in judged
    assert read_records(out).filter(pl.col("stage") == "level-02").height == stopped_rows
    assert limit.sentence in resumed.stdout
