"""With no terminal (a pipe, a CI log) `capplan loadtest` prints one plain line per stage as
the run passes it, against a real streaming server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.profiles import make_profile
from testkit.stream_server import start_server

pytestmark = pytest.mark.integration

CAPPLAN = str(Path(sys.executable).parent / "capplan")


def test_with_no_terminal_each_stage_gets_one_line_as_the_run_passes_it(tmp_path: Path) -> None:
    """stderr is a pipe (CI): the first stage's line arrives while the second still runs.
    Would fail with the live display (nothing on a pipe until the end) or a line per tick."""
    server = start_server(ttft_s=0.01, itl_s=0.002)
    profile = tmp_path / "profile.json"
    profile.write_text(make_profile([(32, 8)]).to_json())
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "stages:\n  - {name: first, duration_s: 2, rate_rps: 4}\n"
        "  - {name: second, duration_s: 4, rate_rps: 4}\n"
    )
    out = tmp_path / "run"
    cmd = [CAPPLAN, "loadtest", "--host", server.url, "--model", "m", "--profile", str(profile)]
    cmd += ["--stage-plan", str(plan), "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
    )
    lines: list[str] = []
    running_at_first: bool | None = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # as the lines come
            lines.append(line.rstrip("\n"))
            if line.startswith("first  t=") and running_at_first is None:
                running_at_first = proc.poll() is None and not (out / "stages.json").exists()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert proc.returncode == 0, lines
    stage_lines = [line for line in lines if "  t=" in line]
    names = [line.split("  t=")[0] for line in stage_lines]
    assert names[:2] == ["first", "second"] and set(names[2:]) <= {"drain"}, lines
    assert running_at_first, lines
    assert lines[0].startswith("preflight: ")
