"""`--executor`: read once at the edge; a malformed one exits 2 on plan, whatif and review with
a message naming the option and the forms it takes (the Dask cluster itself:
tests/integration/test_fleet_dask.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import ConfigError
from contracts.executor import LOCAL, ExecutorSpec, parse_executor


def test_the_forms_it_takes() -> None:
    assert parse_executor("local") == LOCAL
    assert parse_executor("dask://127.0.0.1:8786") == ExecutorSpec("dask", "127.0.0.1:8786")
    assert parse_executor(" dask://sched.example:9000 ").text == "dask://sched.example:9000"
    for bad in ("dask://host", "dask://:8786", "dask://h:0", "dask://h:70000", "ray://h:1", ""):
        with pytest.raises(ConfigError, match="expected 'local' or 'dask://HOST:PORT'"):
            parse_executor(bad)


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--profile", "p.json", "--limit", "17.7rps", "-o", "plan.json"],
        ["whatif", "--profile", "p.json", "--slo", "ttft:p95<=2s", "-o", "w.json"],
        ["review", "review.yaml", "-o", "r.pdf"],
    ],
)
def test_a_malformed_executor_exits_2_before_any_work(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*args, "--executor", "dask://nohost"])
    assert result.exit_code == 2, result.output
    assert "--executor 'dask://nohost': expected 'local' or 'dask://HOST:PORT'" in result.output
    assert "Traceback" not in result.output
