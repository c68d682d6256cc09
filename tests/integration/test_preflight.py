"""The preflight before load and the verdict on a run where nothing succeeded, against real
servers: the emulator (it serves /v1/models), the streaming test server (it does not) and a
port nobody listens on."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import PreflightError
from contracts.rundir import read_stages
from planner.emulator import running_emulator
from planner.engine import build_engine_config
from planner.loadtest.netutil import free_port
from planner.loadtest.preflight import check_base_url, preflight
from testkit.stream_server import start_server

pytestmark = pytest.mark.integration

SERVED = "llama-3.1-8b"


@pytest.fixture(scope="module")
def emulator_url() -> object:
    with running_emulator(build_engine_config("H100-80GB", SERVED)) as url:
        yield url


def test_with_no_model_the_first_one_served_is_taken(emulator_url: str) -> None:
    found = preflight(emulator_url, None, "chat")
    assert found.model == SERVED and found.model_from_target
    assert found.served_models == (SERVED,) and found.ttft_s > 0


def test_a_model_the_target_does_not_serve_names_the_ones_it_does(emulator_url: str) -> None:
    """Would fail if only the test request judged the model (the emulator answers any name)."""
    with pytest.raises(PreflightError, match=f"--model 'llama': .* serves {SERVED}$"):
        preflight(emulator_url, "llama", "completions")


def test_a_host_without_its_scheme_gets_the_url_to_give() -> None:
    with pytest.raises(PreflightError, match="e.g. http://127.0.0.1:8000$"):
        check_base_url("127.0.0.1:8000")
    with pytest.raises(PreflightError, match="http:// or https://"):
        check_base_url("ftp://h:8000")
    assert check_base_url("http://h:8000/") == "http://h:8000"


def test_a_target_without_v1_models_is_judged_by_its_test_request() -> None:
    server = start_server(ttft_s=0.01, itl_s=0.002)
    try:
        assert preflight(server.url, "m", "chat").served_models is None
        with pytest.raises(PreflightError, match="give --model"):
            preflight(server.url, None, "chat")
    finally:
        server.stop()
    failing = start_server(ttft_s=0.01, itl_s=0.002, faults=("500",))
    try:
        with pytest.raises(PreflightError, match="answered HTTP 500"):
            preflight(failing.url, "m", "chat")
    finally:
        failing.stop()


def test_loadtest_on_a_closed_port_fails_fast_with_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"
    args = ["--model", "m", "--rate", "1", "--duration", "2", "-o", str(out)]
    result = CliRunner().invoke(app, ["loadtest", "--host", url, *args])
    assert result.exit_code == 2, result.output
    assert (
        result.output
        == f"error: --host {url}: the target does not answer (" + (result.output.split("(", 1)[1])
    )
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists()  # no run directory for a run that never started


def test_a_run_where_no_request_succeeded_exits_3_with_errors_by_class(tmp_path: Path) -> None:
    """Past the preflight (skipped here) every request is refused: the run directory is
    written and the command ends with exit 3 and a summary by error class on stderr."""
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"
    args = ["--model", "m", "--rate", "4", "--duration", "1", "--no-preflight", "-o", str(out)]
    result = CliRunner().invoke(app, ["loadtest", "--host", url, *args])
    assert result.exit_code == 3, result.output
    assert "error: no request succeeded: 4 scheduled, 0 completed" in result.output
    assert "  connect_refused: 4  (ConnectionRefusedError" in result.output
    (stage,) = read_stages(out)
    assert stage.errors_by_class == {"connect_refused": 4}


def test_a_run_with_some_successes_exits_0_and_names_its_errors(tmp_path: Path) -> None:
    """One request in four fails (each run takes five: the preflight's and four): a warning
    and exit 0; with --max-errors below that share, exit 3; at it, exit 0 (inclusive)."""
    server = start_server(ttft_s=0.01, itl_s=0.002, faults=("ok", "ok", "ok", "500", "ok"))
    args = ["--model", "m", "--rate", "4", "--duration", "1", "--arrival", "constant"]
    try:
        runs = [
            CliRunner().invoke(
                app, ["loadtest", "--host", server.url, *args, *extra, "-o", f"{tmp_path}/{i}"]
            )
            for i, extra in enumerate(([], ["--max-errors", "20%"], ["--max-errors", "0.25"]))
        ]
    finally:
        server.stop()
    plain, strict, inclusive = runs
    assert plain.exit_code == 0, plain.output
    assert "warning: 1 of 4 requests failed (server_error: 1)" in plain.output
    assert strict.exit_code == 3, strict.output
    assert "error: 1 of 4 requests failed (server_error: 1): more than --max-errors 0.2" in (
        strict.output
    )
    assert inclusive.exit_code == 0, inclusive.output
