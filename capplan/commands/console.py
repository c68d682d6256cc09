"""How the commands print: a console sized for where its output goes, and counted nouns."""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 200  # a pipe or a log gets whole tables, not columns squeezed to 80 characters


def stdout_console() -> Console:
    """A console on stdout: the terminal's width on a TTY, PIPED_WIDTH columns otherwise
    (rich would assume 80 and cut column heads to "candi…")."""
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def counted(n: int, noun: str) -> str:
    """ "1 instance", "3 instances": `noun` is the singular with a plain -s plural."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
