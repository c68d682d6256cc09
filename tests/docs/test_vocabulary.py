"""One vocabulary across commands: the table of every option in docs/reference/cli.md has one
row per option name (one meaning, type and list form, or a concept of the small allow-list
SHARED_CONCEPTS), every fraction option takes a percent and says so, and each deprecated
spelling names a current option of its command."""

from __future__ import annotations

import re
from typing import Any

import typer
import typer.main

from capplan.cli import DEPRECATED_OPTIONS
from capplan.commands.shared import SHARED_CONCEPTS
from tests.docs.test_generated import load_script

gen = load_script("gen_cli_docs")


def test_no_option_name_has_two_meanings_across_commands() -> None:
    """Would fail for `--speed` as emulate's engine clock beside loadtest's replay speed."""
    found = gen.collisions(gen.app_commands())
    assert not found, "one option name, several meanings (rename, or add to SHARED_CONCEPTS): " + (
        "; ".join(f"{k}: {[(r.commands, r.meaning, r.type) for r in v]}" for k, v in found.items())
    )


def test_the_check_finds_a_flag_with_two_meanings_or_two_types() -> None:
    """The check itself: two meanings of --speed, two types of --seed, one --port."""
    app = typer.Typer()

    @app.command("emulate")
    def emulate(
        speed: float = typer.Option(1.0, help="Engine seconds per wall second."),
        seed: int = typer.Option(0, help="Seed of the run."),
        port: int = typer.Option(0, help="Port to bind."),
    ) -> None: ...

    @app.command("loadtest")
    def loadtest(
        speed: float = typer.Option(1.0, help="Replay speed-up factor."),
        seed: str = typer.Option("0", help="Seed of the run."),
        port: int = typer.Option(0, help="Port to bind. Another detail."),
    ) -> None: ...

    commands: dict[str, Any] = dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert set(gen.collisions(commands)) == {"--speed", "--seed"}


def test_every_shared_concept_is_an_option_of_several_commands() -> None:
    """The allow-list stays small and true: each entry names an option two commands take."""
    uses = gen.option_uses(gen.app_commands())
    for option in SHARED_CONCEPTS:
        assert len({u.command for u in uses.get(option, [])}) >= 2, option


_FRACTION_WORDS = re.compile(r"\b(share|fraction|quantile|utili[sz]ation|efficiency)\b", re.I)


def test_every_fraction_option_says_it_takes_a_percent() -> None:
    """Would fail for `--peak-quantile` helped as '(0-1)' only."""
    fractions = []
    for option, uses in gen.option_uses(gen.app_commands()).items():
        for use in uses:
            if use.type != "flag" and _FRACTION_WORDS.search(use.meaning):
                fractions.append((use.command, option))
                assert use.type == "share", (use.command, option, use.meaning)
    assert ("plan", "--peak-quantile") in fractions and ("profile", "--shared-prefix-share") in (
        fractions
    )


def test_each_deprecated_spelling_names_a_current_option_and_is_not_one() -> None:
    commands = gen.app_commands()
    for command, renames in DEPRECATED_OPTIONS.items():
        opts = {o for p in commands[command].params for o in getattr(p, "opts", [])}
        for old, new in renames.items():
            assert new in opts and old not in opts, (command, old, new)


def test_the_reference_shows_the_table_and_the_old_spellings() -> None:
    text = gen.render()
    assert "| option | commands | meaning | type | list |" in text
    assert "| `--speed` | `--replay-speed` | loadtest |" in text
    assert "| `--speed` | `--time-scale` | emulate |" in text
