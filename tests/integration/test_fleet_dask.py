"""`--executor dask://`: a real Dask scheduler and two workers on 127.0.0.1 give the fleet check
the same points bit for bit as local processes, and whatif's candidate grid the same
candidates as one process; a bad address exits 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.executor import ExecutorSpec, parse_executor
from planner.engine import build_engine_config
from planner.fleet.check import fleet_check
from planner.slo.spec import parse_slo
from profiles.model import save_profile
from profiles.presets import preset_profile
from tests.helpers.whatif_grid import grid_candidates

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

pytestmark = [pytest.mark.integration]
DASK = str(Path(sys.executable).with_name("dask"))


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [DASK, *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYTHONHASHSEED": "random"},
    )


def _workers(address: str) -> int:
    with distributed.Client(address, timeout=5, set_as_default=False) as client:
        return len(client.scheduler_info()["workers"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and two single-threaded workers on 127.0.0.1; yields `dask://HOST:PORT`."""
    folder = tmp_path_factory.mktemp("dask")
    file = folder / "scheduler.json"
    procs = [
        _start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(file)],
            folder / "scheduler.log",
        )
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        for k in range(2):
            procs.append(
                _start(
                    ["worker", "--scheduler-file", str(file), "--nthreads", "1",
                     "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{k}"],
                    folder / f"worker{k}.log",
                )
            )  # fmt: skip
        while _workers(address) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _workers(address) == 2, (folder / "worker0.log").read_text()
        yield "dask://" + address.removeprefix("tcp://")
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


def _check(executor: ExecutorSpec, shortcut: bool) -> dict[str, object]:
    profile = preset_profile("chat", rate_rps=20.0)
    config = build_engine_config("H100-80GB", "llama-3.1-8b", 1)
    check = fleet_check(
        profile, config, 30.0, 3, parse_slo("ttft:p95<=2s"), 40.0, rng_seed=3,
        shortcut=shortcut, executor=executor,
    )  # fmt: skip
    # Wall times (spent and estimated) are the machine's, not results.
    return check.model_dump(exclude={"wall_s", "estimated_wall_s", "estimated_full_wall_s"})


def test_dask_points_are_the_local_ones_bit_for_bit(cluster: str) -> None:
    local = _check(parse_executor("local"), shortcut=False)
    remote = _check(parse_executor(cluster), shortcut=False)
    assert remote == local
    assert len(local["points"]) >= 6  # type: ignore[arg-type]


def test_the_whatif_grid_on_dask_is_the_one_process_grid(
    cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPPLAN_FLEET_WORKERS", "1")
    assert grid_candidates(parse_executor(cluster)) == grid_candidates()


def test_a_dask_address_nobody_answers_exits_2(tmp_path: Path) -> None:
    profile = tmp_path / "p.json"
    save_profile(preset_profile("chat", rate_rps=40.0), profile)
    for bad, said in (("dask://127.0.0.1:9", "no Dask scheduler answered"),
                      ("dask://nohost", "expected 'local' or 'dask://HOST:PORT'")):  # fmt: skip
        result = CliRunner().invoke(
            app,
            ["plan", "--profile", str(profile), "--limit", "17.7rps", "--slo", "ttft:p95<=2s",
             "-o", str(tmp_path / "plan.json"), "--executor", bad],
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert said in result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "plan.json").exists()
