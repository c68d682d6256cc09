"""`capplan report`: render the capacity-baseline PDF from a profile, a run and a plan."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli import handle_errors


def register(app: typer.Typer) -> None:
    @app.command(
        "report",
        help=(
            "Write the capacity-baseline PDF (English or Chinese) from a profile, a load-test "
            "run directory with its limit.json, and a plan.\n\n"
            "Example:\n\n"
            "capplan report --profile profiles/chat.json --run runs/chat-h100 "
            "--plan plans/q1.json --previous plans/q4.json --lang zh -o reports/q1.pdf"
        ),
    )
    @handle_errors
    def report(
        profile: Path = typer.Option(..., "--profile", help="Profile JSON (capplan profile)."),
        run: Path = typer.Option(..., "--run", help="Run directory (capplan loadtest / limit)."),
        plan: Path = typer.Option(..., "--plan", help="Plan JSON (capplan plan)."),
        out: Path = typer.Option(..., "-o", "--out", help="Where to write the PDF."),
        previous: Path | None = typer.Option(
            None, "--previous", help="Previous plan JSON, for the comparison table on page 1."
        ),
        limit: Path | None = typer.Option(
            None, "--limit", help="limit.json when it is not in the run directory."
        ),
        lang: str = typer.Option("en", "--lang", help="Language of the report: en or zh."),
    ) -> None:
        from reports import render_report

        path = render_report(
            profile, run, plan, out, previous_plan=previous, lang=lang, limit_path=limit
        )
        typer.echo(str(path))
