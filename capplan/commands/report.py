"""`capplan report`: render the capacity-baseline PDF from a profile, a run and a plan, with the
"Which configuration" section from whatif.json / compare.json (or that section alone)."""

from __future__ import annotations

from pathlib import Path

import typer

from capplan.cli import build_options, handle_errors

CJK_FONT_HELP = (
    "TrueType font (.ttf, or .ttc: its first face) whose subset a Chinese report embeds. "
    "Default: $CAPPLAN_CJK_FONT, else the system's Chinese font found by fontconfig, else "
    "the subset of WenQuanYi Micro Hei shipped with capplan (GB2312 and the report's words)."
)


# ReportOptions' fields (reports.options) all spelled --field-name; the model holds each
# default and --lang's choices (tests/capplan/test_options_drift.py)
FLAGS: dict[str, str] = {}


def report_command(
    profile: Path | None = typer.Option(None, "--profile", help="Profile JSON (capplan profile)."),
    run: Path | None = typer.Option(
        None,
        "--run",
        help="Run directory (capplan loadtest / limit). Leave it out for a plan whose limit "
        "was given as a number (plan --limit 17.4rps): the load-test and limit pages are "
        "left out.",
    ),
    plan: Path | None = typer.Option(None, "--plan", help="plan.json of `capplan plan`."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the PDF."),
    previous: Path | None = typer.Option(
        None, "--previous", help="Previous plan JSON, for the comparison table on page 1."
    ),
    limit: Path | None = typer.Option(
        None, "--limit", help="limit.json when it is not in the run directory."
    ),
    lang: str = typer.Option("en", "--lang", help="Language of the report: en or zh."),
    cjk_font: Path | None = typer.Option(None, "--cjk-font", help=CJK_FONT_HELP),
    whatif: Path | None = typer.Option(
        None, "--whatif", help="whatif.json (capplan whatif): adds 'Which configuration'."
    ),
    compare: Path | None = typer.Option(
        None, "--compare", help="compare.json (capplan compare): adds 'Which configuration'."
    ),
    verify: list[Path] = typer.Option(
        [],
        "--verify",
        help="verify.json (capplan verify) of this plan; repeat for N and N-K: adds the "
        "fleet-verification page.",
    ),
) -> None:
    from reports.options import ReportOptions

    options = build_options(
        ReportOptions, FLAGS, profile=profile, run=run, plan=plan, output=output,
        previous=previous, limit=limit, lang=lang, cjk_font=cjk_font, whatif=whatif,
        compare=compare, verify=verify,
    )  # fmt: skip
    path = options.render(lambda line: typer.echo(f"warning: {line}", err=True))
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command(
        "report",
        help=(
            "Write the capacity-baseline PDF (English or Chinese) from a profile, a load-test "
            "run directory with its limit.json (none when the plan's limit was given as a "
            "number), and a plan; --verify adds capplan verify's fleet tests. --whatif and/or "
            "--compare add a 'Which configuration' section (ranked candidates, a cost chart, "
            "the lessons for this workload); given without --profile/--run/--plan, the PDF "
            "holds that section alone.\n\n"
            "Examples:\n\n"
            "capplan report --profile profiles/chat.json --run runs/chat-h100 "
            "--plan plans/q1.json --previous plans/q4.json --lang zh -o reports/q1.pdf\n\n"
            "capplan report --profile profile.json --plan plan.json --verify "
            "runs/verify-n/verify.json -o verified.pdf\n\n"
            "capplan report --whatif whatif.json --compare compare.json -o which.pdf"
        ),
    )(handle_errors(report_command))
