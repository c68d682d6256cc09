"""Every capplan command has help text with an example, and the CLI reports errors cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app

runner = CliRunner()


def _command_names() -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_root_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in _command_names():
        assert name in result.output


@pytest.mark.parametrize("name", _command_names())
def test_every_command_has_help_with_example(name: str) -> None:
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "capplan " + name in result.output, f"`capplan {name} --help` shows no example"


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert "capplan" in result.output


def test_demo_checks_its_cjk_font_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "demo" / "demo.pdf"
    missing = tmp_path / "missing.ttf"
    result = runner.invoke(
        app, ["demo", "--lang", "zh", "--cjk-font", str(missing), "-o", str(out)]
    )
    assert result.exit_code == 2
    assert f"--cjk-font {missing}: no such font file" in result.output
    assert "1/5" not in result.output and not out.parent.exists()
