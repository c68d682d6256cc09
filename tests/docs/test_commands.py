"""Every `capplan ...` command in a code block of the README and the documentation site is
a valid command line of the real CLI: a known command, known options, no stray arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main

from capplan.cli import full_app
from tests.docs.commands import DocCommand, doc_commands, problems, split_commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)


@pytest.fixture(scope="module")
def group() -> Any:
    return typer.main.get_command(full_app())


def all_commands() -> list[DocCommand]:
    return [c for page in PAGES for c in doc_commands(page)]


def test_every_documented_command_is_a_valid_command_line(group: Any) -> None:
    bad = [f"{c.where}\n    -> {why}" for c in all_commands() if (why := problems(group, c.args))]
    assert not bad, "documented commands the CLI rejects:\n" + "\n".join(bad)


def test_the_readme_and_getting_started_pages_document_every_step() -> None:
    named = {c.args[0] for c in all_commands() if c.path.name == "README.md" and c.args}
    assert {"demo", "profile", "limit", "plan", "report", "whatif"} <= named
    getting_started = [c for c in all_commands() if c.path.parent.name == "getting-started"]
    assert len(getting_started) >= 15
    assert any("--api-key-env" in c.args for c in all_commands() if c.path.name == "README.md")


def test_a_made_up_option_or_command_is_caught(group: Any, tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n"
        "CAPPLAN_X=1 capplan plan --profile p.json --limit 5rps \\\n"
        "    --no-such-option 3 -o plan.json   # a comment\n"
        "capplan profile sample:azure_conv -o p.json | tee log.txt\n"
        "capplan frobnicate --x 1\n"
        "capplan plan stray --profile p.json --limit 5rps -o plan.json\n"
        "```\n",
        encoding="utf-8",
    )
    found = doc_commands(page)
    assert [c.line for c in found] == [2, 4, 5, 6]
    verdicts = [problems(group, c.args) for c in found]
    assert verdicts[0] is not None and "--no-such-option" in verdicts[0]
    assert verdicts[1] is None
    assert verdicts[2] is not None and "frobnicate" in verdicts[2]
    assert verdicts[3] is not None and "stray" in verdicts[3]


def test_shell_syntax_is_taken_apart() -> None:
    assert split_commands("capplan emulate --port 8000 &   # in the background") == [
        ["capplan", "emulate", "--port", "8000"]
    ]
    assert split_commands(
        'for d in x; do capplan profile "$d"/a.gz -o days/$(basename $d).json; done'
    ) == [
        ["for", "d", "in", "x"],
        ["do", "capplan", "profile", "$d/a.gz", "-o", "days/SUBST.json"],
        ["done"],
    ]
    assert split_commands("capplan review r.yaml -o r.pdf > out.txt 2>&1") == [
        ["capplan", "review", "r.yaml", "-o", "r.pdf"]
    ]
