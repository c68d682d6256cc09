"""`capplan lb`: nginx as a streaming-safe load balancer in front of instances (thin CLI)."""

from __future__ import annotations

import typer

from capplan.cli import build_options, duration_option, handle_errors

HELP = """Run nginx in front of OpenAI-compatible instances, for `capplan verify --host`.

Waits until every upstream accepts connections (instances just started), then runs \
Debian's nginx in the foreground with a config an LLM gateway needs: streamed answers are \
not buffered (else TTFT is measured at nginx's flush), keep-alive to the upstreams, \
timeouts far above the worst TTFT, no passive ejection of a slow instance (unless \
--passive-check). Round-robin, or --least-conn. Ctrl-C or SIGTERM stops nginx with it; \
on Linux nginx also stops when this process is killed. --print-config writes the config \
for your own nginx instead (its temporary paths under a folder you choose with --folder).

Examples:

  capplan lb --port 8080 http://127.0.0.1:8001 http://127.0.0.1:8002 http://127.0.0.1:8003

  capplan lb --print-config --folder /var/lib/capplan-lb --port 8080 http://10.0.0.1:8000
"""

# LbOptions' fields named otherwise than --field-name
FLAGS = {"wait_s": "--wait-timeout"}


def lb_command(
    upstreams: list[str] = typer.Argument(
        ..., help="Instance base URLs, e.g. http://127.0.0.1:8001.", show_default=False
    ),
    port: int = typer.Option(8080, "--port", help="Port to listen on."),
    bind: str = typer.Option("127.0.0.1", "--bind", help="Address to listen on."),
    least_conn: bool = typer.Option(
        False, "--least-conn", help="nginx's least_conn instead of round-robin."
    ),
    passive_check: bool = typer.Option(
        False,
        "--passive-check",
        help="Keep nginx's passive health check (1 failure ejects an instance for 10 s).",
    ),
    wait_s: float = duration_option(
        60.0,
        "--wait-timeout",
        help="Longest wait for the servers to accept connections. Here the upstreams.",
    ),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print nginx.conf and exit (run it yourself)."
    ),
    folder: str = typer.Option(
        "/tmp/capplan-lb",
        "--folder",
        help="With --print-config: where the config puts nginx's pid, logs and temp files.",
    ),
) -> None:
    from planner.verify.nginx import LbOptions, serve, wait_for_upstreams

    options = build_options(
        LbOptions,
        FLAGS,
        port=port,
        upstreams=upstreams,
        bind=bind,
        least_conn=least_conn,
        passive_check=passive_check,
        wait_s=wait_s,
        print_config=print_config,
        folder=folder,
    )
    if options.print_config:
        typer.echo(options.config_text(), nl=False)
        return
    wait_for_upstreams(options.upstreams, options.wait_s)
    serve(
        lambda url: typer.echo(
            f"nginx balancing {len(options.upstreams)} instance(s) at {url} "
            f"({'least_conn' if options.least_conn else 'round-robin'}); Ctrl-C stops it",
            err=True,
        ),
        **options.balancer(),
    )


def register(app: typer.Typer) -> None:
    app.command("lb", help=HELP)(handle_errors(lb_command))
