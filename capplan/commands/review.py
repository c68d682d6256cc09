"""`capplan review`: the quarterly capacity review of every service, as review.json and a PDF."""

from __future__ import annotations

from pathlib import Path

import typer

from capplan.cli import build_options, handle_errors
from capplan.commands.console import stderr_console
from capplan.commands.shared import ExecutorOption
from contracts.executor import parse_executor
from contracts.jsonio import write_model
from profiles.model import Profile

HELP = """Review every LLM service of a platform in one document: one plan per service, the
fleet total per GPU type (spares per service and shared), capacity by hour of day, growth
from the logs, an interval on each instance count, risks ranked across services, and the
change since the previous review. Writes review.json next to the PDF (or --json).

Example:

  capplan review examples/review.yaml -o reviews/2026-Q4.pdf --previous reviews/2026-Q3.json

  capplan review examples/review.yaml -o reviews/2026-Q4-zh.pdf --lang zh
"""


# ReviewOptions' fields (reports.review.options) named otherwise than --field-name; the model
# holds each default and --lang's choices (tests/capplan/test_options_drift.py)
FLAGS = {"json_out": "--json"}


def register(app: typer.Typer) -> None:
    app.command(name="review", help=HELP)(handle_errors(review_command))


def review_command(
    review_file: Path = typer.Argument(
        ..., help="The review file (YAML), see examples/review.yaml."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the PDF."),
    lang: str = typer.Option("en", "--lang", help="Language of the report: en or zh."),
    previous: Path | None = typer.Option(
        None, "--previous", help="Last quarter's review.json, for the change."
    ),
    json_out: Path | None = typer.Option(
        None, "--json", help="Where to write review.json (default: next to the PDF)."
    ),
    executor: ExecutorOption = "local",
) -> None:
    from planner.review.build import build_review
    from planner.review.config import load_review
    from reports.review.options import ReviewOptions

    options = build_options(
        ReviewOptions, FLAGS, review_file=review_file, output=output, lang=lang,
        previous=previous, json_out=json_out, executor=parse_executor(executor),
    )  # fmt: skip
    console = stderr_console()
    spec = load_review(options.review_file)
    profiles: dict[str, Profile] = {}
    review = build_review(
        spec,
        options.review_file,
        name=options.name,
        previous=options.previous,
        progress=lambda m: console.print(f"[dim]{m}[/dim]"),
        profiles_out=profiles,
        executor=options.executor,
    )
    if review.change is not None and review.change.previous_name == review.name:
        console.print(
            f"[yellow]warning:[/yellow] --previous {options.previous} is review {review.name!r}, "
            f"the same name as this one: the PDF will say 'since {review.name}'; give this "
            "quarter's name with `name:` in the review file, or leave `name:` out to name the "
            "review after its PDF"
        )
    target = options.json_path
    from planner.ops.write import review_with_ops

    review = review_with_ops(
        review, f"capplan review {options.review_file} -o {options.output}", options.ops_dir
    )
    write_model(target, review, "review.json")
    from reports.review import render_review

    render_review(review, options.output, options.lang, profiles)
    for name, profile in profiles.items():  # rows the logs' reader left out, as profile says
        src = profile.source
        if src.rows_skipped:
            console.print(f"{name}: skipped {src.rows_skipped:,} row(s) of its logs:")
            for line in src.skip_examples:
                console.print(f"  {line}", highlight=False, markup=False)
    typer.echo(review.sentence)
    for service in review.services:
        if service.observed is not None:
            typer.echo(f"{service.name}: {service.observed.sentence}")
    typer.echo(f"wrote {target} and {output}")
    written = [s.plan.ops for s in review.services if s.plan.ops is not None]
    if written:
        typer.echo(f"alert rules and dashboards: {Path(written[0].rule_groups).parent.parent}/")
