"""The `capplan plan` command that makes a plan again from its own inputs (the alerts' runbook).

Every input plan.json records that changes the plan is carried: the profile, the limit, the
SLO, the peak, growth, headroom, redundancy, the engine (GPU, model, tp, pp, precision,
catalog), a price the user gave, the host rule, the fleet check's switches, span, seed and
routers. An option is left out only where the plan holds its default. Every value is quoted
for a POSIX shell, so a path with a space or a quote survives a copy and paste.
"""

from __future__ import annotations

import shlex

from contracts.plan import Plan
from planner.capacity.arithmetic import HostRule
from planner.capacity.cost import GIVEN_PRICE_SOURCE
from planner.capacity.plan import PlanOptions
from planner.fleet.routing import RoutingSettings

_DEFAULTS = PlanOptions(profile_path="")


def _number(value: float) -> str:
    """A float as Python writes it back exactly (`0.3`, not `0.30000000000000004`)."""
    return repr(float(value))


def _share(value: float) -> str:
    """A share as parse_share reads it: a fraction up to 1, a percent above."""
    return _number(value) if value <= 1 else f"{_number(value * 100)}%"


def _changed(flag: str, value: object, default: object, text: str | None = None) -> list[str]:
    """`[flag, text]` when `value` is not `default`, else nothing."""
    return [] if value == default else [flag, text if text is not None else str(value)]


def _engine(plan: Plan) -> list[str]:
    i, d = plan.inputs, _DEFAULTS
    return [
        "--gpu", i.gpu, "--model", i.model,
        *_changed("--tp", i.tp, d.tp), *_changed("--pp", i.pp, d.pp),
        *_changed("--quantization", i.quantization, d.quantization),
        *_changed("--kv-cache-dtype", i.kv_cache_dtype, d.kv_cache_dtype),
        *(["--catalog", i.catalog] if i.catalog is not None else []),
    ]  # fmt: skip


def _demand(plan: Plan) -> list[str]:
    i, d = plan.inputs, _DEFAULTS
    peak = (["--peak-rps", _number(i.peak_rps_given)] if i.peak_rps_given is not None else []) + (
        ["--peak-users", _number(i.peak_users_given)] if i.peak_users_given is not None else []
    )
    return [
        *peak,
        *_changed("--peak-window", i.peak_window, d.peak_window),
        *_changed("--peak-quantile", i.peak_quantile, d.peak_quantile, _share(i.peak_quantile)),
        *_changed("--growth", tuple(i.growth), d.growth, ",".join(map(_number, i.growth))),
        "--headroom", _share(i.headroom), "--redundancy", str(i.redundancy),
    ]  # fmt: skip


def _host_and_price(plan: Plan) -> list[str]:
    i, rule = plan.inputs, HostRule()
    price = (
        ["--gpu-hour-price", _number(i.gpu_hour_price_usd)]
        if i.price_source == GIVEN_PRICE_SOURCE
        else []
    )
    cores, ram = i.cpu_cores_per_gpu, i.host_ram_per_gpu_memory
    return [
        *price,
        *([] if cores is None else _changed("--cpu-cores-per-gpu", cores, rule.cpu_cores_per_gpu)),
        *(
            []
            if ram is None
            else _changed("--host-ram-per-gpu-memory", ram, rule.host_ram_per_gpu_memory,
                          _number(ram))
        ),
    ]  # fmt: skip


def _fleet(plan: Plan, calibration: str | None) -> list[str]:
    i, d = plan.inputs, _DEFAULTS
    if not i.fleet_check:
        return ["--no-fleet-check", *_changed("--seed", i.seed, d.seed)]
    span = i.fleet_span_s if i.fleet_span_s is not None else d.fleet_span_s
    out = [
        *_changed("--fleet-span", span, d.fleet_span_s, f"{_number(span)}s"),
        *_changed("--seed", i.seed, d.seed),
        *(["--calibration", calibration] if calibration is not None else []),
        *(["--no-calibrate"] if not i.calibrate and calibration is None else []),
    ]
    fleet = plan.checks.fleet
    if fleet is not None and fleet.assumed_routing is not None:
        routers = dict.fromkeys([fleet.assumed_routing, *(r.routing for r in fleet.routers)])
        out += ["--routing", ",".join(routers)]
        threshold = fleet.prefix_threshold
        if threshold is not None and threshold != RoutingSettings().prefix_threshold:
            out += ["--prefix-threshold", _share(threshold)]
    return out


def replan_command(
    plan: Plan,
    plan_path: str,
    *,
    calibration: str | None = None,
    accept_unconfirmed: bool = False,
) -> str:
    """The `capplan plan` command that makes `plan` again with its own inputs, writing
    `plan_path`, each value shell-quoted.

    `calibration` (the cal.json the fleet check simulated with) and `accept_unconfirmed` are
    the inputs plan.json does not record; the caller passes them. The autoscaling study
    (--autoscale) is not repeated: it does not change the plan's count or cost.
    """
    i = plan.inputs
    words = [
        "capplan", "plan", "--profile", i.profile, "--limit", i.limit.source,
        *(["--accept-unconfirmed"] if accept_unconfirmed else []),
        *(["--slo", i.slo] if i.slo else []),
        *_demand(plan), *_engine(plan), *_host_and_price(plan),
        *_fleet(plan, calibration), "-o", plan_path,
    ]  # fmt: skip
    return shlex.join(words)
