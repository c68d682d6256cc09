"""`capplan report`: render the capacity-baseline PDF from a profile, a run and a plan."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli import handle_errors

CJK_FONT_HELP = (
    "TrueType font (.ttf, or .ttc: its first face) whose subset a Chinese report embeds. "
    "Default: $CAPPLAN_CJK_FONT, else the system's Chinese font found by fontconfig, else "
    "STSong-Light (not embedded; a warning says which viewers show it blank)."
)


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
        cjk_font: Path | None = typer.Option(None, "--cjk-font", help=CJK_FONT_HELP),
    ) -> None:
        from reports import render_report

        path = render_report(
            profile,
            run,
            plan,
            out,
            previous_plan=previous,
            lang=lang,
            limit_path=limit,
            cjk_font=cjk_font,
            warn=lambda line: typer.echo(f"warning: {line}", err=True),
        )
        typer.echo(str(path))
