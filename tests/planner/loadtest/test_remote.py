"""planner.loadtest.remote: the master's bind address and `capplan worker`'s bad input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import ConfigError
from planner.loadtest.remote import master_args, parse_address


def test_master_bind_needs_host_port_and_workers() -> None:
    assert parse_address("10.0.0.5:5557", "--master") == ("10.0.0.5", 5557)
    assert parse_address("[::1]:5557", "--master") == ("::1", 5557)
    for bad in ("10.0.0.5", ":5557", "h:0", "h:port"):
        with pytest.raises(ConfigError, match="HOST:PORT"):
            parse_address(bad, "--master")
    with pytest.raises(ConfigError, match="--expect-workers"):
        master_args("0.0.0.0:5557", 0, 60.0)


def test_worker_command_rejects_a_bad_master_with_exit_2() -> None:
    result = CliRunner().invoke(app, ["worker", "--master", "nohostport"])
    assert result.exit_code == 2 and "expected HOST:PORT" in result.output


def test_loadtest_with_master_bind_and_workers_is_refused(tmp_path: object) -> None:
    result = CliRunner().invoke(
        app,
        [
            "loadtest",
            "--host",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--rate",
            "1",
            "--duration",
            "1",
            "--master-bind",
            "127.0.0.1:5557",
            "--expect-workers",
            "2",
            "--workers",
            "2",
            "-o",
            f"{tmp_path}/run",
        ],
    )
    assert result.exit_code == 2 and "drop --workers" in result.output
