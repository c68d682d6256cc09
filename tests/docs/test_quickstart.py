"""The README's quickstart commands that take seconds run as documented: the no-logs path
(preset -> whatif -> plan, the plan with a shorter fleet simulation) and the logs path's
profile step on the shipped sample."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import full_app
from tests.docs.commands import doc_commands

ROOT = Path(__file__).resolve().parents[2]


def readme_section(title: str, tmp_path: Path) -> Path:
    """One `## title` section of the README as a page of its own, for doc_commands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}.*?(?=^## )", text, re.S | re.M)
    assert match, f"README has no section {title!r}"
    page = tmp_path / "section.md"
    page.write_text(match.group(0), encoding="utf-8")
    return page


def run(args: tuple[str, ...] | list[str]) -> None:
    result = CliRunner().invoke(full_app(), list(args))
    assert result.exit_code == 0, f"capplan {' '.join(args)}:\n{result.output}"


def test_the_no_logs_quickstart_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = doc_commands(readme_section("Quickstart 3", tmp_path))
    assert [c.args[0] for c in commands] == ["profile", "whatif", "plan"]
    monkeypatch.chdir(tmp_path)
    for command in commands:
        # The fleet check simulates 300 s per fleet size by default (27 s here); 20 s keeps
        # this test fast and runs the same code.
        extra = ["--fleet-span", "20"] if command.args[0] == "plan" else []
        run([*command.args, *extra])
    for name in ("chat.json", "whatif.json", "plan.json"):
        assert (tmp_path / name).stat().st_size > 0


def test_the_logs_quickstart_profiles_the_shipped_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = doc_commands(readme_section("Quickstart 2", tmp_path))
    profile = next(c for c in commands if c.args[0] == "profile")
    assert "sample:azure_conv" in (ROOT / "README.md").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    run(["profile", "sample:azure_conv", *profile.args[2:]])
    assert (tmp_path / "profile.json").stat().st_size > 0
