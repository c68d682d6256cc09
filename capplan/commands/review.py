"""`capplan review`: the quarterly capacity review of every service, as review.json and a PDF."""

from __future__ import annotations

from pathlib import Path

import typer

from capplan.cli import handle_errors
from capplan.commands.console import stderr_console
from capplan.commands.shared import ExecutorOption
from contracts.errors import InputError
from contracts.jsonio import write_model
from planner.fleet.executor import parse_executor
from profiles.model import Profile

HELP = """Review every LLM service of a platform in one document: one plan per service, the
fleet total per GPU type (spares per service and shared), capacity by hour of day, growth
from the logs, an interval on each instance count, risks ranked across services, and the
change since the previous review. Writes review.json next to the PDF (or --json).

Example:

  capplan review examples/review.yaml -o reviews/2026-Q4.pdf --previous reviews/2026-Q3.json

  capplan review examples/review.yaml -o reviews/2026-Q4-zh.pdf --lang zh
"""


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
    from reports.i18n import LANGS

    if lang not in LANGS:
        raise InputError(f"--lang {lang!r}: expected one of {', '.join(LANGS)}")
    executor_spec = parse_executor(executor)
    console = stderr_console()
    spec = load_review(review_file)
    profiles: dict[str, Profile] = {}
    review = build_review(
        spec,
        review_file,
        name=output.stem,
        previous=previous,
        progress=lambda m: console.print(f"[dim]{m}[/dim]"),
        profiles_out=profiles,
        executor=executor_spec,
    )
    target = json_out or output.with_suffix(".json")
    from planner.ops.write import review_with_ops

    review = review_with_ops(
        review, f"capplan review {review_file} -o {output}", output.with_name(output.stem + "-ops")
    )
    write_model(target, review, "review.json")
    from reports.review import render_review

    render_review(review, output, lang, profiles)
    typer.echo(review.sentence)
    for service in review.services:
        if service.observed is not None:
            typer.echo(f"{service.name}: {service.observed.sentence}")
    typer.echo(f"wrote {target} and {output}")
    written = [s.plan.ops for s in review.services if s.plan.ops is not None]
    if written:
        typer.echo(f"alert rules and dashboards: {Path(written[0].rule_groups).parent.parent}/")
