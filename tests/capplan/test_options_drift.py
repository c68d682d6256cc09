"""Each option of `capplan verify`, `plan`, `whatif`, `limit`, `loadtest`, `compare`,
`calibrate`, `demo`, `emulate`, `lb`, `profile`, `report`, `review` and `worker` declared once
(issue 58 item 2): the command's options model (VerifyOptions, PlanOptions, WhatifOptions,
LimitOptions, LoadTestOptions, CompareOptions, CalibrateOptions, DemoOptions, EmulateOptions,
LbOptions, ProfileOptions, ReportOptions, ReviewOptions, WorkerOptions) holds its bound and
default; the CLI parameter only spells it. These tests fail when the two drift apart: a field
no option reaches, a default written twice and changed once, a bound the CLI does not enforce
through the model (or enforces with a check of its own that disagrees)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import annotated_types
import click
import pytest
from pydantic import BaseModel
from typer.main import get_command
from typer.testing import CliRunner

from capplan.cli import app, one_growth, parse_fraction, parse_share
from capplan.commands.calibrate import FLAGS as CALIBRATE_FLAGS
from capplan.commands.compare import FLAGS as COMPARE_FLAGS
from capplan.commands.demo import FLAGS as DEMO_FLAGS
from capplan.commands.emulate import FLAGS as EMULATE_FLAGS
from capplan.commands.lb import FLAGS as LB_FLAGS
from capplan.commands.limit import FLAGS as LIMIT_FLAGS
from capplan.commands.loadtest import FLAGS as LOADTEST_FLAGS
from capplan.commands.plan import FLAGS as PLAN_FLAGS
from capplan.commands.profile import FLAGS as PROFILE_FLAGS
from capplan.commands.profile import parse_cache_tokens
from capplan.commands.report import FLAGS as REPORT_FLAGS
from capplan.commands.review import FLAGS as REVIEW_FLAGS
from capplan.commands.verify import FLAGS as VERIFY_FLAGS
from capplan.commands.whatif import FLAGS as WHATIF_FLAGS
from capplan.commands.worker import FLAGS as WORKER_FLAGS
from capplan.demo import DemoOptions
from contracts.executor import parse_executor
from planner.calibrate import CalibrateOptions
from planner.capacity.arithmetic import parse_float_list
from planner.capacity.plan import PlanOptions
from planner.emulator.options import EmulateOptions
from planner.limit.options import LimitOptions
from planner.loadtest.options import LoadTestOptions
from planner.loadtest.remote import WorkerOptions
from planner.loadtest.workers import parse_workers
from planner.verify.nginx import LbOptions
from planner.verify.options import VerifyOptions
from planner.whatif.compare import CompareOptions
from planner.whatif.knobs import parse_vary
from planner.whatif.options import WhatifOptions
from profiles.options import ProfileOptions
from reports.options import ReportOptions
from reports.review.options import ReviewOptions


@dataclass(frozen=True)
class Command:
    """One command and its options model, as the drift tests read them."""

    name: str
    model: type[BaseModel]
    flags: Mapping[str, str]  # field (a nested one by its path) -> --option
    argv: Callable[[Path], list[str]]  # the required options (files that need not exist)
    not_options: frozenset[str] = frozenset()  # fields no option sets
    not_fields: frozenset[str] = frozenset()  # parameters that are another layer's input
    inverted: frozenset[str] = frozenset()  # fields a flag sets to False (--no-preflight)
    # field -> how the CLI reads the option's text (its default is text, the model's a value)
    parse: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    shares: frozenset[str] = frozenset()  # fields given as a fraction or a percent


def split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


VERIFY = Command(
    "verify",
    VerifyOptions,
    VERIFY_FLAGS,
    lambda tmp: ["verify", "--plan", str(tmp / "plan.json"), "--profile", str(tmp / "p.json"),
                 "-o", str(tmp / "run"), "--host", "http://127.0.0.1:9"],
    # the verify run's fixed steady-state rules and the request timeout
    not_options=frozenset({"rules", "request_timeout_s"}),
    inverted=frozenset({"preflight"}),
)  # fmt: skip
PLAN = Command(
    "plan",
    PlanOptions,
    PLAN_FLAGS,
    lambda tmp: ["plan", "--profile", str(tmp / "p.json"), "--limit", "4rps",
                 "-o", str(tmp / "plan.json")],
    # the plan's name (the output's stem) and a cal.json's factors (--calibration, a file)
    not_options=frozenset({"name", "engine_overrides"}),
    # the limit, the output and its format, the autoscale study, the alert rules
    not_fields=frozenset({
        "limit", "output", "accept_unconfirmed", "output_format", "calibration", "ops_out",
        "autoscale", "autoscale_policy", "cold_start_s", "autoscale_out", "deployment",
    }),
    inverted=frozenset({"fleet", "calibrate", "fleet_shortcut"}),
    parse={
        "peak_quantile": lambda text: parse_share("--peak-quantile", text),
        "headroom": lambda text: parse_share("--headroom", text),
        "routing_settings.prefix_threshold": lambda text: parse_share("--prefix-threshold", text),
        "growth": lambda text: tuple(parse_float_list(text, "--growth")),
        "tp": int,
        "pp": int,
        "executor": parse_executor,
    },
    shares=frozenset({"peak_quantile", "headroom", "routing_settings.prefix_threshold"}),
)  # fmt: skip
WHATIF = Command(
    "whatif",
    WhatifOptions,
    WHATIF_FLAGS,
    lambda tmp: ["whatif", "--profile", str(tmp / "p.json"), "--slo", "ttft:p95<=2s",
                 "-o", str(tmp / "whatif.json")],
    # a cal.json's factors (--calibration, a file), the search's tolerance, the router
    # comparison's span (the plan's default)
    not_options=frozenset({"engine_overrides", "tolerance", "routing_span_s"}),
    # the output and its format, the measured limit and the cal.json (files)
    not_fields=frozenset({"output", "output_format", "calibrate", "calibration"}),
    parse={
        "gpus": lambda text: tuple(p.strip() for p in text.split(",") if p.strip()),
        "tps": int_tuple,
        "pps": int_tuple,
        "vary": parse_vary,
        "kv_link_bandwidth_bytes_per_s": lambda gbps: gbps * 1e9,
        "peak_quantile": lambda text: parse_share("--peak-quantile", text),
        "headroom": lambda text: parse_share("--headroom", text),
        "routing_settings.prefix_threshold": lambda text: parse_share("--prefix-threshold", text),
        "growth": lambda text: one_growth("whatif", text),
        "executor": parse_executor,
        # left out: the --calibration's engine, else the model's vllm
        "engine": lambda text: text or "vllm",
    },
    shares=frozenset({"peak_quantile", "headroom", "routing_settings.prefix_threshold"}),
)  # fmt: skip
LIMIT = Command(
    "limit",
    LimitOptions,
    LIMIT_FLAGS,
    # a closed port: a value the model let through would reach the preflight's refusal
    lambda tmp: ["limit", "--host", "http://127.0.0.1:9", "--slo", "ttft:p95<=1s",
                 "-o", str(tmp / "run")],
    # the demo's level rules at once, the bracketing factor, a deciding level's repeats, the
    # drain after a level and --verify-burst's steady stage: the search's own, no option's
    not_options=frozenset({"steady_rules", "growth", "max_repeats", "drain_s", "verify_steady_s"}),
    # the SLO's reading (into its Slo), the preflight, the run to resume, the CSV prefix
    not_fields=frozenset({"success_only", "no_preflight", "resume", "csv"}),
    parse={"tolerance": lambda text: parse_share("--tolerance", text), "workers": parse_workers},
    shares=frozenset({"tolerance"}),
)  # fmt: skip
LOADTEST = Command(
    "loadtest",
    LoadTestOptions,
    LOADTEST_FLAGS,
    lambda tmp: ["loadtest", "--host", "http://127.0.0.1:9", "--model", "m",
                 "-o", str(tmp / "run")],
    # vllm bench serve's spellings, checked by capplan.commands.vbench
    not_fields=frozenset({
        "dataset_name", "data", "random_input_len", "random_output_len", "random_range_ratio",
        "num_prompts", "request_rate", "burstiness", "percentile_metrics", "metric_percentiles",
        "csv",
    }),
    inverted=frozenset({"ignore_eos", "scrape_metrics", "preflight"}),
    parse={
        "workers": parse_workers,
        "max_error_share": lambda text: parse_fraction("--max-errors", text),
    },
    shares=frozenset({"max_error_share"}),
)  # fmt: skip
COMPARE = Command(
    "compare",
    CompareOptions,
    COMPARE_FLAGS,
    lambda tmp: ["compare", str(tmp / "run"), "--profile", str(tmp / "p.json"),
                 "-o", str(tmp / "compare.json")],
    not_fields=frozenset({"output"}),  # where compare.json goes
    parse={
        "labels": split,
        "gpus": split,
        "peak_quantile": lambda text: parse_fraction("--peak-quantile", text, positive=True),
        "headroom": lambda text: parse_share("--headroom", text),
        "growth": lambda text: one_growth("compare", text),
    },
    shares=frozenset({"peak_quantile", "headroom"}),
)  # fmt: skip
CALIBRATE = Command(
    "calibrate",
    CalibrateOptions,
    CALIBRATE_FLAGS,
    lambda tmp: ["calibrate", "--host", "http://127.0.0.1:9", "--model", "m",
                 "-o", str(tmp / "run")],
    not_options=frozenset({"api_key"}),  # read from the variable --api-key-env names
    not_fields=frozenset({"output", "api_key_env"}),  # where cal.json goes; the key's variable
    parse={"max_drift": lambda text: parse_fraction("--max-drift", text, positive=True)},
    shares=frozenset({"max_drift"}),
)  # fmt: skip


def _demo_argv(tmp: Path) -> list[str]:
    """-o under a file: a value the model let through would stop at the demo's first mkdir,
    not run the demo's minutes."""
    (tmp / "taken").write_text("a file")
    return ["demo", "-o", str(tmp / "taken" / "demo.pdf")]


DEMO = Command(
    "demo",
    DemoOptions,
    DEMO_FLAGS,
    _demo_argv,
    # the demo's setting: its GPU, model, SLO, emulator speed and search, the plan's growth
    not_options=frozenset({
        "gpu", "model", "slo", "speed", "stream_interval", "start_share", "search_growth",
        "tolerance", "max_levels", "verify_steady_s", "method", "growth", "fleet_span_s",
    }),
)  # fmt: skip
EMULATE_SHARES = {
    "gpu_memory_utilization": lambda text: parse_fraction("--gpu-memory-utilization", text),
    "mfu": lambda text: parse_fraction("--mfu", text),
    "mbu": lambda text: parse_fraction("--mbu", text),
    "faults.error_rate": lambda text: parse_fraction("--error-rate", text),
    "faults.drop_rate": lambda text: parse_fraction("--drop-rate", text),
    "faults.stall_rate": lambda text: parse_fraction("--stall-rate", text),
}
EMULATE = Command(
    "emulate",
    EmulateOptions,
    EMULATE_FLAGS,
    # an --engine-config that is not there: a value the model let through stops at reading
    # it, before the server starts
    lambda tmp: ["emulate", "--engine-config", str(tmp / "missing.json")],
    parse=EMULATE_SHARES,
    shares=frozenset(EMULATE_SHARES),
)
LB = Command(
    "lb",
    LbOptions,
    LB_FLAGS,
    # --print-config: a value the model let through prints a config, no nginx starts
    lambda tmp: ["lb", "--print-config", "--folder", str(tmp / "lb"), "http://127.0.0.1:9"],
)
PROFILE = Command(
    "profile",
    ProfileOptions,
    PROFILE_FLAGS,
    # a preset: a value the model let through writes a profile (no output is checked for)
    lambda tmp: ["profile", "--preset", "chat", "-o", str(tmp / "run")],
    parse={
        "cache_tokens": parse_cache_tokens,
        "figures.shared_prefix_share": lambda text: parse_share("--shared-prefix-share", text),
    },
    shares=frozenset({"figures.shared_prefix_share"}),
)  # fmt: skip
REPORT = Command(
    "report",
    ReportOptions,
    REPORT_FLAGS,
    # a whatif.json that is not there: a value the model let through stops at reading it
    lambda tmp: ["report", "--whatif", str(tmp / "missing.json"), "-o", str(tmp / "r.pdf")],
)
REVIEW = Command(
    "review",
    ReviewOptions,
    REVIEW_FLAGS,
    # a review file that is not there: a value the model let through stops at reading it
    lambda tmp: ["review", str(tmp / "missing.yaml"), "-o", str(tmp / "r.pdf")],
    parse={"executor": parse_executor},
)
WORKER = Command(
    "worker",
    WorkerOptions,
    WORKER_FLAGS,
    lambda tmp: ["worker", "--master", "127.0.0.1:9", "--once"],
)
COMMANDS = [
    VERIFY, PLAN, WHATIF, LIMIT, LOADTEST, COMPARE, CALIBRATE, DEMO, EMULATE, LB, PROFILE,
    REPORT, REVIEW, WORKER,
]  # fmt: skip


def params(command: Command) -> dict[str, click.Parameter]:
    """The command's parameters by the field (path) each sets, or their own name."""
    commands = get_command(app).commands  # type: ignore[attr-defined]  # a group
    field_of = {flag: path for path, flag in command.flags.items()}
    out = {}
    for param in commands[command.name].params:
        flag = max(param.opts, key=len)
        out[field_of.get(flag, param.name or "")] = param
    return out


def model_default(command: Command, path: str) -> Any:
    """The model's default of a field, or of a nested one (`host_rule.cpu_cores_per_gpu`)."""
    top, _, rest = path.partition(".")
    default = command.model.model_fields[top].get_default(call_default_factory=True)
    return getattr(default, rest) if rest else default


def bounds(command: Command, path: str) -> list[Any]:
    """The annotated_types bounds of a field, or of a nested dataclass's field."""
    top, _, rest = path.partition(".")
    info = command.model.model_fields[top]
    if not rest:
        # a list's items' bounds (growth factors, --tp values) besides the field's own
        items = [arg for arg in typing.get_args(info.annotation) if hasattr(arg, "__metadata__")]
        extras = [extra for item in items for extra in item.__metadata__]
        return [*info.metadata, *(b for extra in extras for b in getattr(extra, "metadata", ()))]
    hints = typing.get_type_hints(info.annotation, include_extras=True)
    extras = getattr(hints[rest], "__metadata__", ())
    return [bound for extra in extras for bound in getattr(extra, "metadata", ())]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_field_has_its_option_and_every_option_its_field(command: Command) -> None:
    found = params(command)
    fields = set(command.model.model_fields)
    reached = {path.partition(".")[0] for path in found}
    assert sorted(fields - command.not_options - reached) == []
    for path in set(found) - command.not_fields:
        top, _, rest = path.partition(".")
        assert top in fields, f"{command.name}: {path} is no field of {command.model.__name__}"
        if rest:
            assert hasattr(model_default(command, top), rest), path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_default_is_the_models(command: Command) -> None:
    for path, param in params(command).items():
        if path in command.not_fields or param.required:
            continue
        top = path.partition(".")[0]
        if command.model.model_fields[top].is_required():
            continue
        default = model_default(command, path)
        cli = param.default
        if path in command.inverted:
            cli = not cli  # --no-preflight False: preflight True
        if isinstance(default, list) and cli is None:
            cli = []  # a comma-separated option left out: no URLs
        if isinstance(default, Path | type(None)) or path == "slo":
            continue  # None on both sides, or parsed apart (the plan's SLO by default)
        if path in command.parse:
            cli = command.parse[path](cli)
        assert cli == default, f"{max(param.opts, key=len)}: CLI {cli!r}, model {default!r}"


def _cases(command: Command) -> list[tuple[Command, str, str, str, float]]:
    """(command, field, --flag, the text given, the value just outside the field's bound)
    for every bound of every field an option sets."""
    cases = []
    for path, param in params(command).items():
        if path in command.not_fields:
            continue
        flag = max(param.opts, key=len)
        for bound in bounds(command, path):
            if isinstance(bound, annotated_types.Gt):
                value = float(bound.gt)
            elif isinstance(bound, annotated_types.Ge):
                value = float(bound.ge - 1)
            elif isinstance(bound, annotated_types.Le):
                value = float(bound.le + 1)
            else:
                continue
            # a share above 1 is given as a percent (the edge refuses a bare 2 with a hint)
            above = path in command.shares and value > 0
            text = f"{value * 100:g}%" if above else f"{value:g}"
            cases.append((command, path, flag, text, value))
    return cases


CASES = [case for command in COMMANDS for case in _cases(command)]


def test_the_bounded_fields_are_the_ones_expected() -> None:
    """The bound scan sees the models' bounds (a scan that saw none would pass the next test)."""
    seen = {(command.name, path) for command, path, *_ in CASES}
    assert seen >= {("verify", path) for path in (
        "steady_s", "burst_s", "recovery_s", "burst_factor", "time_scale", "replay_speed",
        "instances_down", "workers", "expect_workers", "wait_s",
    )}  # fmt: skip
    assert seen >= {("plan", path) for path in (
        "peak_quantile", "peak_rps", "peak_users", "headroom", "redundancy", "tp", "pp",
        "gpu_hour_price_usd", "fleet_span_s", "host_rule.cpu_cores_per_gpu",
        "host_rule.host_ram_per_gpu_memory", "routing_settings.prefix_threshold", "growth",
    )}  # fmt: skip
    assert seen >= {("whatif", path) for path in (
        "tps", "pps", "kv_link_bandwidth_bytes_per_s", "max_model_len", "peak_quantile",
        "peak_rps", "growth", "headroom", "redundancy", "gpu_hour_price_usd", "level_s",
        "routing_settings.prefix_threshold",
    )}  # fmt: skip
    assert seen >= {("limit", path) for path in (
        "start", "max_load", "level_duration_s", "warmup_s", "max_level_s", "hold_budget_s",
        "level_requests", "effective_requests", "tail_requests", "time_scale", "tolerance",
        "workers", "expect_workers", "min_completed", "max_levels",
    )}  # fmt: skip
    assert seen >= {("loadtest", path) for path in (
        "rate", "users", "duration_s", "replay_speed", "workers", "expect_workers",
        "max_concurrency", "slo_ttft_s", "request_timeout_s", "time_scale", "max_error_share",
    )}  # fmt: skip
    assert seen >= {("calibrate", path) for path in ("tp", "pp", "budget_s", "max_drift")}
    assert seen >= {("emulate", path) for path in (
        "tp", "pp", "port", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
        "time_scale", "stream_interval", "faults.error_rate", "faults.reject_when_waiting",
        "faults.drop_rate", "faults.stall_rate", "mfu", "mbu", "step_overhead_s",
    )}  # fmt: skip
    assert seen >= {("lb", path) for path in ("port", "wait_s")}
    assert seen >= {("profile", path) for path in (
        "block_tokens", "chunk_rows", "figures.rate_rps", "figures.peak_to_mean",
        "figures.input_mean", "figures.output_mean", "figures.shared_prefix_tokens",
        "figures.shared_prefix_share",
    )}  # fmt: skip
    assert seen >= {("compare", path) for path in (
        "tp", "gpu_hour_price_usd", "peak_quantile", "peak_rps", "growth", "headroom",
        "redundancy",
    )}  # fmt: skip
    # a field with two bounds keeps both (the path alone is seen while one of them is left)
    below_and_above = {(command.name, path, text) for command, path, _, text, _ in CASES}
    assert below_and_above >= {
        ("calibrate", "max_drift", "0"), ("calibrate", "max_drift", "200%"),
        ("emulate", "port", "-1"), ("emulate", "port", "65536"),
        ("emulate", "faults.error_rate", "-1"), ("emulate", "faults.error_rate", "200%"),
        ("emulate", "mfu", "0"), ("emulate", "mfu", "200%"),
        ("lb", "port", "0"), ("lb", "port", "65536"),
        ("profile", "figures.shared_prefix_share", "0"),
        ("profile", "figures.shared_prefix_share", "200%"),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("command", "field", "flag", "text", "value"),
    CASES,
    ids=[f"{c.name}-{flag}-{text}" for c, _, flag, text, _ in CASES],
)
def test_a_value_outside_the_models_bound_is_refused_naming_the_option(
    tmp_path: Path, command: Command, field: str, flag: str, text: str, value: float
) -> None:
    result = CliRunner().invoke(app, [*command.argv(tmp_path), flag, text])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    # the model's words, or an option's own parser's (`--workers '-1': expected a count`)
    said = (f"{flag} {value:g}: expected", f"{flag} {text}: expected", f"{flag} {text!r}: expected")
    assert any(words in message for words in said), message
    assert "Traceback" not in result.output
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("command", "extra", "said"),
    [
        (VERIFY, ["--steady-duration", "inf"], "--steady-duration inf: expected a duration >= 0"),
        (PLAN, ["--peak-rps", "nan"], "--peak-rps nan: expected a finite number"),
        (PLAN, ["--growth", "1,-1"], "--growth -1: expected a finite number > 0"),
        (LIMIT, ["--tail-requests", "inf"], "--tail-requests inf: expected a finite number"),
        (LIMIT, ["--dimension", "users"], "--dimension 'users': expected rate or concurrency"),
    ],
    ids=["verify-inf", "plan-nan", "plan-growth-item", "limit-inf", "limit-dimension"],
)
def test_a_non_finite_number_or_a_bad_list_item_is_refused(
    tmp_path: Path, command: Command, extra: list[str], said: str
) -> None:
    result = CliRunner().invoke(app, [*command.argv(tmp_path), *extra])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("command", "extra", "said"),
    [
        (LOADTEST, ["--endpoint", "chats"], "--endpoint 'chats': expected chat or completions"),
        (DEMO, ["--lang", "xx"], "--lang 'xx': expected en or zh"),
        (EMULATE, ["--queue-policy", "lifo"], "--queue-policy 'lifo': expected fcfs or spf"),
        (REPORT, ["--lang", "xx"], "--lang 'xx': expected en or zh"),
        (REVIEW, ["--lang", "xx"], "--lang 'xx': expected en or zh"),
    ],
    ids=["loadtest-endpoint", "demo-lang", "emulate-queue-policy", "report-lang", "review-lang"],
)
def test_a_word_outside_the_models_choices_is_refused_naming_the_option_and_the_choices(
    tmp_path: Path, command: Command, extra: list[str], said: str
) -> None:
    result = CliRunner().invoke(app, [*command.argv(tmp_path), *extra])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
    assert not (tmp_path / "run").exists()
