"""A default stated in `capplan limit --help` is the default the code uses (SteadyRules):
the test fails when one of them changes without the other."""

from __future__ import annotations

import re

import typer

from capplan.cli import app
from planner.limit.measured.steady import SteadyRules

# option -> the SteadyRules fields whose defaults its help states, in the order it states them
STATED = {
    "--effective-requests": ("effective_requests",),
    "--tail-requests": ("tail_requests",),
    "--warmup": ("min_warmup_s", "warmup_e2es"),
}


def _help(command: str, option: str) -> str:
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    (param,) = [p for p in cmd.params if option in getattr(p, "opts", ())]
    return str(getattr(param, "help", ""))


def test_limit_help_states_the_steady_rules_defaults() -> None:
    for option, fields in STATED.items():
        text = _help("limit", option)
        stated = [float(n) for n in re.findall(r"default (\d+(?:\.\d+)?)", text)]
        stated += [float(n) for n in re.findall(r"and (\d+(?:\.\d+)?) mean E2Es", text)]
        defaults = [float(SteadyRules.model_fields[f].default) for f in fields]
        assert stated == defaults, (option, text)


def test_the_executor_help_prints_the_install_command_whole() -> None:
    """rich read "[dask]" in `--executor`'s help as a style tag and printed "pip install -e
    '.'", which installs no Dask (a bug hunt)."""
    from typer.testing import CliRunner

    for command in ("plan", "whatif", "review"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"})
        assert "pip install -e '.[dask]'" in result.output, (command, result.output)
