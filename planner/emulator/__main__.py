"""`python -m planner.emulator ...`: the `capplan emulate` command alone (used for subprocesses)."""

import typer

from planner.commands.emulate import register

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    app()
