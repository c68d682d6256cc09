"""`capplan worker`: a load-generating worker for a master on another host (thin CLI)."""

from __future__ import annotations

import typer

from capplan.cli import build_options, handle_errors

HELP = """Generate load for a capplan master on another host.

Joins the master started with `capplan loadtest|limit|verify ... --master-bind HOST:PORT
--expect-workers N`, takes the plan, profile and options from it, sends its share of the
open-loop schedule to the target and its records back to the master. After the master's
run ends it waits for the next one at the same address (each `capplan limit` level is one
run), until Ctrl-C or with --once. The API key, when the master names one with
--api-key-env, is read from this host's environment. Clocks of all hosts must be in sync
(NTP): the schedule is in Unix time.

Example:

  capplan worker --master 10.0.0.5:5557
"""

# WorkerOptions' fields (planner.loadtest.remote) all spelled --field-name; the model holds
# each default (tests/capplan/test_options_drift.py)
FLAGS: dict[str, str] = {}


def register(app: typer.Typer) -> None:
    app.command("worker", help=HELP)(handle_errors(worker_command))


def worker_command(
    master: str = typer.Option(
        ..., "--master", help="HOST:PORT of the master (its --master-bind)."
    ),
    once: bool = typer.Option(False, "--once", help="Exit after one run of the master."),
) -> None:
    from planner.loadtest.remote import WorkerOptions, run_worker

    code = run_worker(build_options(WorkerOptions, FLAGS, master=master, once=once))
    if code != 0:
        raise typer.Exit(code)
