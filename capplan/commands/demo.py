"""`capplan demo`: profile a shipped sample, load-test the emulator, plan, and write the PDF."""

from __future__ import annotations

from pathlib import Path

import typer

from capplan.cli import build_options, handle_errors
from capplan.commands.report import CJK_FONT_HELP

# DemoOptions' fields named otherwise than --field-name
FLAGS = {"out_pdf": "--output"}


def demo_command(
    out: Path = typer.Option(Path("reports/demo.pdf"), "-o", "--output", help="PDF to write."),
    lang: str = typer.Option("en", "--lang", help="Language of the report: en or zh."),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the random draws. Here the profile sampler and the load."
    ),
    cjk_font: Path | None = typer.Option(None, "--cjk-font", help=CJK_FONT_HELP),
) -> None:
    from capplan.demo import DemoOptions, run_demo

    options = build_options(
        DemoOptions, FLAGS, out_pdf=out, lang=lang, seed=seed, cjk_font=cjk_font
    )
    result = run_demo(
        options,
        echo=lambda line: typer.echo(line),
        warn=lambda line: typer.echo(f"warning: {line}", err=True),
    )
    typer.echo(f"inputs: {result.profile}, {result.run_dir}, {result.plan}")
    typer.echo(f"done in {result.wall_s:.0f} s; the capacity baseline is at:")
    typer.echo(str(result.pdf))


def register(app: typer.Typer) -> None:
    app.command(
        "demo",
        help=(
            "Run the whole loop on built-in defaults, without a GPU: profile the sample trace "
            "shipped in the package, start the engine emulator, find the per-instance SLO "
            "limit with Locust, check burst recovery, plan the fleet, and write the PDF "
            "(about three minutes on two cores).\n\n"
            "Example:\n\n"
            "capplan demo -o reports/demo.pdf --lang zh"
        ),
    )(handle_errors(demo_command))
