"""The locustfile's options: capplan's --llm-* and how Locust's -u, -r and -t were given.

Locust fills in -u 1 and -r 1 before a headless test starts, so what the user typed is read
once, at init (`given_common`); a test started from the web UI's form takes the form's
values (Locust writes them into the parsed options).
"""

from __future__ import annotations

from typing import Any

from locustfiles.stages import CommonOptions

COMMON = ("num_users", "spawn_rate", "run_time")


def add_options(parser: Any) -> None:
    """capplan's options of the locustfile, all prefixed --llm- (Locust owns --profile)."""
    parser.add_argument(
        "--llm-profile", default="", help="capplan profile JSON (default: the built-in chat preset)"
    )
    parser.add_argument("--llm-model", default="", help="model name sent in each request")
    parser.add_argument(
        "--llm-endpoint",
        default="chat",
        choices=["chat", "completions"],
        help="OpenAI endpoint kind",
    )
    parser.add_argument(
        "--llm-plan",
        default="",
        help="steady | steady-burst-recovery | steps | a YAML/JSON plan file",
    )
    parser.add_argument(
        "--llm-rate", type=float, default=0.0, help="open-loop rate (req/s) for built-in plans"
    )
    parser.add_argument(
        "--llm-users", type=int, default=0, help="closed-loop users for built-in plans"
    )
    parser.add_argument(
        "--llm-duration", type=float, default=0.0, help="stage length (s) for built-in plans"
    )
    parser.add_argument("--llm-arrival", default="poisson", help="poisson | constant | gamma:K")
    parser.add_argument("--llm-seed", type=int, default=0, help="seed of requests and arrivals")
    parser.add_argument(
        "--llm-api-key-env", default="", help="environment variable holding the API key"
    )
    parser.add_argument(
        "--llm-out", default="", help="folder for records (default: runs/locust-<time>)"
    )
    parser.add_argument(
        "--llm-replay", default="", help="request log to replay (stages with arrival: replay)"
    )
    parser.add_argument(
        "--llm-replay-start", type=float, default=0.0, help="log second where the replay starts"
    )
    parser.add_argument("--llm-speed", type=float, default=1.0, help="replay speed-up factor")
    parser.add_argument(
        "--llm-time-scale",
        type=float,
        default=1.0,
        help="the endpoint's clock runs this many times faster than wall time (an emulator "
        "at --time-scale S): schedules and records are in its time",
    )
    parser.add_argument(
        "--llm-no-ignore-eos", action="store_true", help="do not send ignore_eos/min_tokens"
    )
    parser.add_argument(
        "--llm-request-timeout",
        type=float,
        default=300.0,
        help="seconds before a request times out",
    )
    parser.add_argument(
        "--llm-max-concurrency",
        type=int,
        default=0,
        help="client cap on requests in flight (0: none)",
    )
    parser.add_argument(
        "--llm-drain",
        type=float,
        default=30.0,
        help="seconds to wait for in-flight requests at the end",
    )
    parser.add_argument(
        "--llm-no-metrics", action="store_true", help="do not scrape the target's /metrics"
    )
    parser.add_argument(
        "--llm-run-epoch",
        type=float,
        default=0.0,
        help="Unix time of the run's t = 0 (append runs)",
    )
    parser.add_argument(
        "--llm-slo-ttft",
        type=float,
        default=0.0,
        help="TTFT bound (s) of a good request, for the live goodput (0: none)",
    )
    parser.add_argument(
        "--llm-slo-tpot",
        type=float,
        default=0.0,
        help="TPOT bound (s) of a good request, for the live goodput (0: none)",
    )
    parser.add_argument(
        "--llm-managed",
        action="store_true",
        help="set by capplan loadtest, which writes run.json and stages.json itself",
    )


def given_common(options: Any) -> frozenset[str]:
    """Which of -u, -r, -t the command line gave (read at init, before Locust's defaults)."""
    return frozenset(k for k in COMMON if getattr(options, k, None) is not None)


def common_options(options: Any, given: frozenset[str], from_form: bool) -> CommonOptions:
    """-u, -r and -t for this test: the web UI form's values, else those given at the start."""

    def value(key: str) -> Any:
        return getattr(options, key, None) if from_form or key in given else None

    users, rate, run_time = value("num_users"), value("spawn_rate"), value("run_time")
    return CommonOptions(
        users=None if users is None else int(users),
        spawn_rate_users_per_s=float(rate) if rate else None,
        run_time_s=float(run_time) if run_time else None,
    )
