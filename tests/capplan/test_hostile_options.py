"""Every command's numeric options driven with hostile values: each is refused with one
`error:` line naming the option, exit code 2 and no traceback, before any work starts.

Each row would fail if its value reached the computation: a pydantic traceback, a silent
default (`--duration 0` read as "not given"), a plan at 2000 % headroom, or (for the live
commands, whose target is a closed port) the preflight's "does not answer" instead of the
option's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from capplan.cli import app, parse_share
from contracts.errors import ConfigError
from testkit.report_inputs import planning_inputs

DEAD = "http://127.0.0.1:9"
LIVE = {
    "loadtest": ["loadtest", "--host", DEAD, "--model", "m", "--rate", "1", "--duration", "1"],
    "limit": ["limit", "--host", DEAD, "--model", "m", "--slo", "ttft:p95<=1s"],
}

# (command, option, hostile value)
CASES = [
    *(("loadtest", "--duration", v) for v in ("-2", "0", "nan", "inf")),
    *(("loadtest", "--users", v) for v in ("-1", "0")),
    *(("loadtest", "--rate", v) for v in ("-1", "0", "nan", "inf")),
    ("loadtest", "--timeout", "0"),
    ("loadtest", "--timeout", "-1"),
    ("loadtest", "--replay-speed", "0"),
    ("loadtest", "--max-concurrency", "0"),
    ("loadtest", "--time-scale", "-1"),
    ("loadtest", "--expect-workers", "-1"),
    ("loadtest", "--slo-ttft", "-1"),
    ("loadtest", "--max-errors", "5"),
    ("loadtest", "--max-errors", "-1%"),
    ("limit", "--level-duration", "-1"),
    ("limit", "--level-duration", "nan"),
    ("limit", "--start", "0"),
    ("limit", "--start", "-1"),
    ("limit", "--max", "-1"),
    *(("limit", "--tolerance", v) for v in ("2", "100%", "0")),
    ("limit", "--max-levels", "0"),
    ("limit", "--level-requests", "0"),
    ("limit", "--min-completed", "-1"),
    ("limit", "--warmup", "-1"),
    ("limit", "--tail-requests", "-1"),
    ("limit", "--effective-requests", "nan"),
    ("limit", "--max-level-duration", "0"),
    *(("limit", "--hold-budget", v) for v in ("0", "-5", "nan")),
    ("limit", "--time-scale", "0"),
    ("limit", "--expect-workers", "-1"),
    *(("plan", "--headroom", v) for v in ("20", "1.5", "-0.1", "-5%", "nan", "x")),
    ("plan", "--redundancy", "-1"),
    ("plan", "--tp", "0"),
    ("plan", "--growth", "-1"),
    ("plan", "--growth", "0"),
    ("plan", "--peak-rps", "-5"),
    ("plan", "--peak-users", "-1"),
    *(("plan", "--peak-quantile", v) for v in ("1.5", "99", "120%", "0%")),
    ("plan", "--prefix-threshold", "150%"),
    ("plan", "--tp", "1,2"),
    ("plan", "--gpu-hour-price", "-1"),
    ("plan", "--fleet-span", "0"),
    ("plan", "--fleet-span", "1e9"),  # drew 8e9 arrivals: a MemoryError traceback
    ("plan", "--cpu-cores-per-gpu", "-1"),
    *(("whatif", "--tp", v) for v in ("0", "-2", "1,0")),
    ("whatif", "--headroom", "20"),
    ("whatif", "--redundancy", "-1"),
    ("whatif", "--growth", "0"),
    ("whatif", "--peak-rps", "-1"),
    *(("whatif", "--level-duration", v) for v in ("0", "-5", "1e9")),  # 1e9: MemoryError
    ("whatif", "--peak-quantile", "2"),
    ("whatif", "--max-model-len", "0"),
    ("whatif", "--gpu-hour-price", "-1"),
    ("whatif", "--quantization", "int3"),
    ("whatif", "--kv-cache-dtype", "fp4"),
    *(("whatif", "--pp", v) for v in ("0", "1,0", "x")),
    ("plan", "--quantization", "int3"),
    ("plan", "--kv-cache-dtype", "fp4"),
    ("plan", "--pp", "0"),
    ("compare", "--headroom", "20"),
    ("compare", "--tp", "0"),
    ("compare", "--growth", "-1"),
    ("compare", "--redundancy", "-1"),
    ("compare", "--peak-quantile", "0"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return planning_inputs(tmp_path_factory.mktemp("hostile"))


def _argv(command: str, files: dict[str, Path], out: Path) -> list[str]:
    if command in LIVE:
        return [*LIVE[command], "-o", str(out)]
    profile = str(files["profile"])
    if command == "plan":
        limit = str(files["run"] / "limit.json")
        return ["plan", "--profile", profile, "--limit", limit, "-o", str(out)]
    if command == "whatif":
        return ["whatif", "--profile", profile, "--slo", "ttft:p95<=2s", "-o", str(out)]
    return ["compare", str(files["run"]), "--profile", profile, "-o", str(out)]


def _refused(args: list[str], option: str) -> None:
    result = CliRunner().invoke(app, args)
    output = result.output.strip()
    assert result.exit_code == 2, (args, result.output)
    assert "Traceback" not in output and len(output.splitlines()) == 1, output
    assert output.startswith("error: ") and option in output, output


@pytest.mark.parametrize(("command", "option", "value"), CASES)
def test_a_hostile_value_is_one_line_and_exit_2(
    files: dict[str, Path], tmp_path: Path, command: str, option: str, value: str
) -> None:
    out = tmp_path / "out"
    _refused([*_argv(command, files, out), option, value], option)
    assert not out.exists()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    option=st.sampled_from(["--duration", "--rate", "--users", "--timeout", "--max-concurrency"]),
    value=st.one_of(st.integers(max_value=0), st.floats(max_value=0.0), st.just(float("nan"))),
)
def test_loadtest_refuses_any_value_at_or_below_zero(
    files: dict[str, Path], option: str, value: float
) -> None:
    if option in ("--users", "--max-concurrency") and isinstance(value, float):
        value = int(value) if value == value and abs(value) < 1e18 else -1
    out = files["root"] / "never"
    _refused([*_argv("loadtest", files, out), option, str(value)], option)
    assert not out.exists()


def test_an_existing_file_as_output_folder_is_refused(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a run")
    _refused([*LIVE["loadtest"], "-o", str(taken)], "-o")
    _refused([*LIVE["limit"], "-o", str(taken)], "-o")
    assert taken.read_text() == "not a run"


def test_a_directory_given_to_profile_says_so(tmp_path: Path) -> None:
    _refused(["profile", str(tmp_path), "-o", str(tmp_path / "p.json")], str(tmp_path))
    result = CliRunner().invoke(app, ["profile", str(tmp_path), "-o", str(tmp_path / "p.json")])
    assert "is a directory" in result.output


def test_a_share_is_a_fraction_or_a_percent_and_a_bare_percent_gets_a_hint() -> None:
    assert parse_share("--headroom", "0.2") == parse_share("--headroom", "20%") == 0.2
    assert parse_share("--headroom", "150%") == 1.5 and parse_share("--headroom", "1") == 1.0
    with pytest.raises(ConfigError, match=r"^--headroom 20: .* write 20% \(or 0\.2\)$"):
        parse_share("--headroom", "20")


def test_plan_reads_20_percent_headroom_as_0_2(files: dict[str, Path], tmp_path: Path) -> None:
    """Would fail if `20%` were refused or read as another share than 0.2."""
    plans = []
    for headroom in ("0.2", "20%"):
        out = tmp_path / f"plan-{headroom}.json"
        args = [*_argv("plan", files, out), "--headroom", headroom, "--no-fleet-check"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        plans.append(json.loads(out.read_text()))
    assert plans[0]["inputs"]["headroom"] == plans[1]["inputs"]["headroom"] == 0.2
    assert plans[0]["instances"] == plans[1]["instances"]
