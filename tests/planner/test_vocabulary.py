"""One word for one thing across commands: every command's `-o` is `--output` (the old
`--out` still accepted), and the load test's stage plan is `--stage-plan` (`--plan` is a
plan.json elsewhere; the old spelling still accepted)."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from capplan.cli import app


def _commands() -> dict[str, object]:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_output_option_is_spelled_output() -> None:
    """Would fail for a command whose -o is only --out (or anything else)."""
    seen = []
    for name, command in _commands().items():
        for param in command.params:  # type: ignore[attr-defined]
            opts = getattr(param, "opts", [])
            if "-o" in opts:
                assert "--output" in opts, (name, opts)
                seen.append(name)
    assert {"loadtest", "limit", "plan", "report", "demo"} <= set(seen)


def test_the_old_spellings_still_reach_the_option(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    base = ["loadtest", "--host", "http://127.0.0.1:9", "--model", "m", "--rate", "1"]
    for flag in ("--output", "--out"):
        result = CliRunner().invoke(app, [*base, "--duration", "1", flag, str(taken)])
        assert result.exit_code == 2 and "a file exists there" in result.output, result.output
    for flag in ("--stage-plan", "--plan"):
        result = CliRunner().invoke(app, [*base, flag, "nosuch", "-o", str(tmp_path / "r")])
        assert result.exit_code == 2 and "unknown plan 'nosuch'" in result.output, result.output
