"""How the commands print: a console sized for where its output goes, and counted nouns."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from contracts.errors import InputError
from contracts.plan import FleetCheck

PIPED_WIDTH = 200  # a pipe or a log gets whole tables, not columns squeezed to 80 characters


def stdout_console() -> Console:
    """A console on stdout: the terminal's width on a TTY, PIPED_WIDTH columns otherwise
    (rich would assume 80 and cut column heads to "candi…"); see `piped_console`."""
    return piped_console(stderr=False)


def stderr_console() -> Console:
    """A console on stderr, sized as `stdout_console` is for stdout."""
    return piped_console(stderr=True)


def piped_console(*, stderr: bool) -> Console:
    """A console on stdout or stderr: the terminal's own on a TTY; piped or redirected, tables
    PIPED_WIDTH columns wide and sentences never wrapped (soft wrap: one line per sentence,
    as a log or `grep` wants them, where rich would break them at the width mid-sentence)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPED_WIDTH, soft_wrap=True)


def counted(n: int, noun: str) -> str:
    """ "1 instance", "3 instances": `noun` is the singular with a plain -s plural."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


FORMATS = ("table", "json")
FORMAT_HELP = (
    "What goes to stdout: table (rich tables, sized to the terminal) or json (the document "
    "written with -o, for scripts; 'wrote ...' then goes to stderr)."
)


def check_format(value: str) -> str:
    """`value` if it is a known --format, else an InputError naming the known ones."""
    if value not in FORMATS:
        raise InputError(f"--format: unknown {value!r}; choose one of {', '.join(FORMATS)}")
    return value


def print_result(
    document: BaseModel, output: Path, fmt: str, tables: Callable[[Console], None]
) -> None:
    """The command's result on stdout as tables or as the JSON document, then where it went."""
    if fmt == "json":
        typer.echo(document.model_dump_json(by_alias=True, indent=2))
        typer.echo(f"wrote {output}", err=True)
        return
    tables(stdout_console())
    typer.echo(f"wrote {output}")


def print_routers(fleet: FleetCheck, console: Console) -> None:
    """The instances each router needs and the prefix-hit ratio it reaches (--routing)."""
    if not fleet.routers:
        return
    ideal = fleet.ideal_prefix_hit_ratio
    table = Table(
        title="Instances by router (prefix hits at the planned count; the profile's ideal "
        + ("-" if ideal is None else f"{ideal:.1%}")
        + ")"
    )
    for col in ("routing", "fewest meeting SLO", "prefix hit ratio", "of ideal"):
        table.add_column(col, justify="right")
    for r in fleet.routers:
        hit = r.prefix_hit_ratio
        table.add_row(
            r.routing + (" (assumed)" if r.routing == fleet.assumed_routing else ""),
            str(r.min_instances_meeting)
            if r.min_instances_meeting is not None
            else f"> {r.searched_up_to}",
            "-" if hit is None else f"{hit:.1%}",
            "-" if r.ideal_share is None else f"{r.ideal_share:.0%}",
        )
    console.print(table)
