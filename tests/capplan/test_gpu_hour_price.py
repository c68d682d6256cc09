"""--gpu-hour-price is one option in plan, whatif and compare: each refuses 0 and below at the
option, before reading a file (a price of 0 would cost a fleet nothing and rank every board
alike; owned GPUs are given their amortised cost), and each help says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from capplan.cli import app


def _argv(command: str, tmp: Path) -> list[str]:
    """The command with a profile that does not exist: refusing the price first proves it is
    refused at the option, not on the way (a missing profile would be said otherwise)."""
    profile = str(tmp / "missing.json")
    return {
        "plan": ["plan", "--profile", profile, "--limit", "4rps", "-o", str(tmp / "plan.json")],
        "whatif": ["whatif", "--profile", profile, "--slo", "ttft:p95<=2s",
                   "-o", str(tmp / "whatif.json")],
        "compare": ["compare", str(tmp / "run"), "--profile", profile,
                    "-o", str(tmp / "compare.json")],
    }[command]  # fmt: skip


@pytest.mark.parametrize("command", ["plan", "whatif", "compare"])
@pytest.mark.parametrize("price", ["0", "-1"])
def test_a_price_of_0_or_below_is_refused_alike(tmp_path: Path, command: str, price: str) -> None:
    result = CliRunner().invoke(app, [*_argv(command, tmp_path), "--gpu-hour-price", price])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"--gpu-hour-price {price}: expected a finite number > 0" in said, said
    assert "missing.json" not in said and "Traceback" not in result.output


def test_each_help_says_the_price_must_be_above_0() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    helps = {
        name: param.help
        for name in ("plan", "whatif", "compare")
        for param in commands[name].params
        if "--gpu-hour-price" in param.opts
    }
    assert len(helps) == 3 and len(set(helps.values())) == 1, helps
    assert "USD per GPU-hour for every GPU, > 0" in helps["plan"]
