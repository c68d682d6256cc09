"""Capacity arithmetic of the plan: per-instance limit, demand, instance counts, resources, cost.

Every function here is pure: it takes typed values and returns typed values (the plan_schema
models), so the arithmetic is testable without files, engines or clocks.

Instances: n = ceil(peak x growth x (1 + headroom) / per-instance limit) + redundancy, in the
limit's unit (req/s for a rate limit, concurrent users for a concurrency limit). Demand is
converted between the two by Little's law (concurrency = rate x e2e at the limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from contracts.errors import ConfigError, InputError
from contracts.finding import Finding
from contracts.jsonio import read_json
from contracts.limit import LimitResult, load_limit, unconfirmed_reason, unit_label
from contracts.plan import LIMIT_NUMBER_RE, Demand, LimitInput, Scenario, SensitivityCell
from contracts.whatif import WHATIF_SCHEMA
from planner.capacity.cost import monthly_cost_usd
from planner.slo.recorded import limit_slo
from planner.slo.spec import Slo
from profiles.model import Profile

Unit = Literal["rps", "users"]
# Float noise must not add an instance (0.3 x 3 / 0.3 is 3.0000000000000004).
_CEIL_EPS = 1e-9

# ----------------------------------------------------------------------------- the limit

_UNIT_ALIASES: dict[str, Unit] = {
    "rps": "rps",
    "req/s": "rps",
    "qps": "rps",
    "users": "users",
    "user": "users",
    "concurrent": "users",
    "conc": "users",
}


@dataclass(frozen=True)
class Limit:
    """The per-instance limit the plan divides by, and where it came from."""

    value: float
    unit: Unit
    source: str
    slo: Slo | None = None
    mean_e2e_s: float | None = None
    binding: str | None = None
    result: LimitResult | None = None

    def to_input(self) -> LimitInput:
        return LimitInput(
            value=self.value,
            unit=self.unit,
            source=self.source,
            slo=None if self.slo is None else self.slo.text,
            mean_e2e_s=self.mean_e2e_s,
            binding=self.binding,
            # A limit the engine model made (the demo's emulator) stays a prediction in the
            # plan, with its interval, so the report's first page can say so.
            predicted=self.result.predicted if self.result is not None else None,
        )


# How to take an unconfirmed limit anyway, where the limit comes from `capplan plan`.
ACCEPT_HINT = "plan with it anyway with --accept-unconfirmed"


def parse_limit(
    text: str,
    slo: Slo | None = None,
    *,
    accept_unconfirmed: bool = False,
    accept_hint: str = ACCEPT_HINT,
) -> Limit:
    """Read `--limit`: a limit.json path, or a positive number with its unit (`17.4rps`, `50users`).

    Raises ConfigError for a zero, negative or unit-less number, an unknown unit, a limit.json
    without a feasible load, a limit.json measured under another SLO than `slo` (when given),
    or an unconfirmed one (`unconfirmed_reason`) unless `accept_unconfirmed` (its message ends
    with `accept_hint`, how to take it anyway where it was given); InputError for a file that
    is not a readable limit.json.
    """
    match = LIMIT_NUMBER_RE.match(text)
    if match and not Path(text).is_file():
        number, unit_text = float(match.group(1)), match.group(2).lower()
        if not unit_text:
            raise ConfigError(
                f"--limit {text!r}: a number needs its unit, e.g. '{number:g}rps' (requests per "
                f"second) or '{number:g}users' (concurrent requests)"
            )
        unit = _UNIT_ALIASES.get(unit_text)
        if unit is None:
            raise ConfigError(
                f"--limit {text!r}: unknown unit {unit_text!r}; expected one of "
                f"{', '.join(sorted(_UNIT_ALIASES))}"
            )
        if not number > 0:
            raise ConfigError(f"--limit {text!r}: the per-instance limit must be > 0")
        return Limit(value=number, unit=unit, source=text.strip(), slo=slo)
    return _limit_from_file(Path(text), slo, accept_unconfirmed, accept_hint)


def _limit_from_file(
    path: Path, slo: Slo | None, accept_unconfirmed: bool, accept_hint: str
) -> Limit:
    if not path.exists():
        raise InputError(
            f"--limit {str(path)!r}: neither a limit.json that exists nor a number with a unit "
            f"(e.g. 17.4rps, 50users)"
        )
    try:
        result = load_limit(path)
    except InputError:
        _refuse_predictions(path)
        raise
    reason = unconfirmed_reason(result)
    if reason is not None and result.feasible_max is None:  # nothing to accept, even unconfirmed
        raise ConfigError(
            f"--limit {path}: the search stopped before any load met the SLO ({reason}); there "
            f"is no limit to plan with yet: finish the search (capplan limit --resume "
            f"{path.parent})"
        )
    if reason is not None and not accept_unconfirmed:
        raise ConfigError(
            f"--limit {path}: the limit {result.feasible_max:g} {unit_label(result.unit)} is "
            f"unconfirmed ({reason}); finish the search (capplan limit --resume "
            f"{path.parent}) or {accept_hint}"
        )
    return limit_from_result(result, str(path), slo)


def _refuse_predictions(path: Path) -> None:
    """ConfigError, saying why, when `path` is a whatif.json: its limits are the engine model's
    predictions, each already planned there with its interval (not a limit to plan with)."""
    data = read_json(path, "limit")
    if isinstance(data, dict) and data.get("schema") == WHATIF_SCHEMA:
        raise ConfigError(
            f"--limit {path}: a whatif.json holds the engine model's predicted limits, each "
            f"already planned there (instances, cost) with the interval where a GPU's limit is "
            f"expected; its report says so (capplan report --whatif {path}). Plan with a "
            f"limit.json measured on the GPU (capplan limit)"
        )


def limit_from_result(result: LimitResult, source: str, slo: Slo | None) -> Limit:
    """The plan's per-instance limit from a limit result (a load test's; one whose endpoint was
    the engine model itself says so in `predicted`, which the plan keeps); `source` names
    where it came from. ConfigError when no load met the SLO, or the result was
    measured under another SLO than `slo` (when given). An unconfirmed result is taken as it
    is (parse_limit refuses one unless asked)."""
    if result.feasible_max is None or result.feasible_max <= 0:
        raise ConfigError(
            f"{source}: no load met the SLO {result.slo!r} (feasible_max is "
            f"{result.feasible_max}); there is no per-instance limit to plan with"
        )
    measured = limit_slo(result)
    if slo is not None and slo.canonical != measured.canonical:
        raise ConfigError(
            f"{source}: the limit was measured under the SLO {result.slo!r}, but --slo asks for "
            f"{slo.text!r}; measure the limit under the same SLO (capplan limit --slo ...)"
        )
    return Limit(
        value=result.feasible_max,
        unit=result.unit,
        source=source,
        slo=measured,
        mean_e2e_s=_e2e_at_limit(result),
        binding=result.binding,
        result=result,
    )


def _e2e_at_limit(result: LimitResult) -> float | None:
    """Mean e2e at the feasible maximum: Little's law block first, else that level's mean."""
    if result.littles_law is not None and result.littles_law.mean_e2e_s > 0:
        return result.littles_law.mean_e2e_s
    for level in result.levels:
        if level.load == result.feasible_max and level.mean_e2e_s:
            return level.mean_e2e_s
    return None


# ----------------------------------------------------------------------------- demand


def window_rate_quantile(profile: Profile, window: str, quantile: float) -> float:
    """The `quantile` (0..1) of the profile's window rates over `window`, linearly interpolated.

    Raises ConfigError for a quantile outside [0, 1] or a window the profile does not have.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ConfigError(f"--peak-quantile must be within [0, 1], got {quantile}")
    table = profile.arrivals.window_rate_percentiles
    values = table.get(window)
    if not values:
        known = ", ".join(sorted(table)) or "none"
        raise ConfigError(
            f"--peak-window {window!r}: the profile has no window-rate percentiles for it "
            f"(windows in this profile: {known})"
        )
    position = quantile * (len(values) - 1)
    lo = math.floor(position)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (position - lo)


def build_demand(
    profile: Profile,
    peak_window: str = "60s",
    peak_quantile: float = 0.99,
    peak_rps: float | None = None,
    peak_users: float | None = None,
    mean_e2e_s: float | None = None,
) -> Demand:
    """The planning peak and what goes with it.

    Default peak: the `peak_quantile` of `peak_window` window rates. `peak_rps` or
    `peak_users` given directly override it (users are converted to a rate by Little's law
    with `mean_e2e_s`). Burst factor: the profile's peak 10 s window rate over its own
    planning peak, so a peak given directly keeps the traffic's burst shape.
    Raises ConfigError when both overrides are given, an override is not positive, or users
    are given without an e2e to convert them.
    """
    if peak_rps is not None and peak_users is not None:
        raise ConfigError("give --peak-rps or --peak-users, not both")
    arrivals = profile.arrivals
    if peak_rps is not None:
        if not peak_rps > 0:
            raise ConfigError(f"--peak-rps must be > 0, got {peak_rps}")
        rate, definition = peak_rps, "given (--peak-rps)"
    elif peak_users is not None:
        if not peak_users > 0:
            raise ConfigError(f"--peak-users must be > 0, got {peak_users}")
        if not mean_e2e_s:
            raise ConfigError(
                "--peak-users needs the e2e at the limit to convert users to a rate; use a "
                "limit.json with latencies or a concurrency limit (e.g. 50users)"
            )
        rate, definition = peak_users / mean_e2e_s, "given (--peak-users), rate by Little's law"
    else:
        rate = window_rate_quantile(profile, peak_window, peak_quantile)
        definition = f"p{peak_quantile * 100:g} of {peak_window} window rates"
        if not rate > 0:
            raise ConfigError(
                f"the profile's {definition} is {rate:g} req/s; give the peak with --peak-rps"
            )
    # The burst shape of the traffic: the profile's 10 s peak over its own planning peak,
    # carried over to a peak given directly.
    peak_10s = arrivals.peak_rate_rps.get("10s")
    burst_factor = None
    if peak_10s and arrivals.window_rate_percentiles.get(peak_window):
        own_peak = window_rate_quantile(profile, peak_window, peak_quantile)
        burst_factor = peak_10s / own_peak if own_peak > 0 else None
    concurrency = peak_users if peak_users is not None else None
    if concurrency is None and mean_e2e_s:
        concurrency = rate * mean_e2e_s
    return Demand(
        peak_rps=rate,
        peak_definition=definition,
        mean_rps=arrivals.mean_rate_rps,
        burst_factor=burst_factor,
        burst_peak_rps=burst_factor * rate if burst_factor is not None else None,
        peak_concurrency=concurrency,
        mean_e2e_s=mean_e2e_s,
        interarrival_cv=arrivals.interarrival_cv,
    )


def demand_in_unit(demand: Demand, unit: Unit) -> float:
    """The peak in the limit's unit: req/s, or concurrent requests by Little's law.

    Raises ConfigError when a concurrency limit meets a demand without an e2e to convert it.
    """
    if unit == "rps":
        return demand.peak_rps
    if demand.peak_concurrency is None:
        raise ConfigError(
            "a concurrency limit (users) needs the peak as concurrency: give --peak-users, or a "
            "limit.json that records the e2e at the limit (Little's law)"
        )
    return demand.peak_concurrency


# ----------------------------------------------------------------------------- instances


def instances_for_load(demand: float, limit: float, headroom: float) -> int:
    """ceil(demand x (1 + headroom) / limit), at least 1. Raises ConfigError for bad inputs."""
    if not limit > 0:
        raise ConfigError(f"the per-instance limit must be > 0, got {limit}")
    if headroom < 0:
        raise ConfigError(f"--headroom must be >= 0, got {headroom}")
    if demand < 0:
        raise ConfigError(f"demand must be >= 0, got {demand}")
    return max(1, math.ceil(demand * (1.0 + headroom) / limit - _CEIL_EPS))


def plan_scenario(
    peak: float,
    unit: Unit,
    limit: float,
    growth: float,
    headroom: float,
    redundancy: int,
    tp: int,
    gpu_hour_price_usd: float,
) -> Scenario:
    """One growth scenario: instances, GPUs and monthly cost, with the arithmetic written out.

    `peak` and `limit` are in `unit`. Raises ConfigError for a non-positive growth, a negative
    redundancy or headroom, or a non-positive limit.
    """
    if not growth > 0:
        raise ConfigError(f"--growth factors must be > 0, got {growth}")
    if redundancy < 0:
        raise ConfigError(f"--redundancy must be >= 0, got {redundancy}")
    demand = peak * growth
    with_headroom = demand * (1.0 + headroom)
    for_load = instances_for_load(demand, limit, headroom)
    instances = for_load + redundancy
    gpus = instances * tp
    arithmetic = (
        f"ceil({peak:.4g} {unit_label(unit)} x {growth:g} growth x (1 + {headroom:g} headroom) / "
        f"{limit:.4g} {unit_label(unit)} per instance) + {redundancy} redundancy = "
        f"ceil({with_headroom / limit:.3f}) + {redundancy} = {instances}"
    )
    return Scenario(
        growth=growth,
        demand=demand,
        demand_with_headroom=with_headroom,
        per_instance_limit=limit,
        unit=unit,
        instances_for_load=for_load,
        redundancy=redundancy,
        instances=instances,
        gpus=gpus,
        monthly_cost_usd=monthly_cost_usd(gpus, gpu_hour_price_usd),
        arithmetic=arithmetic,
    )


def sensitivity(
    peak: float,
    limit: float,
    growths: list[float],
    headrooms: list[float],
    redundancy: int,
) -> list[SensitivityCell]:
    """Instances for every growth x headroom pair (redundancy included)."""
    return [
        SensitivityCell(
            growth=g,
            headroom=h,
            instances=instances_for_load(peak * g, limit, h) + redundancy,
        )
        for g in growths
        for h in headrooms
    ]


# ----------------------------------------------------------------------------- host and cost


@dataclass(frozen=True)
class HostRule:
    """CPU cores and host RAM per instance: base + per GPU.

    Defaults follow the ratios of NVIDIA's HGX/DGX H100 reference systems (DGX H100: 112 CPU
    cores and 2 TB of host RAM for 8 x 80 GB GPUs, i.e. 14 cores and 2 x the GPU memory per
    GPU), rounded down for cores: 4 cores for the API server, tokenizer and scheduler plus 8
    per GPU worker; host RAM 16 GiB plus 2 x the instance's GPU memory (weights are staged
    through host memory at load, plus the engine's CPU swap space and pinned buffers).
    """

    cpu_cores_base: int = 4
    # bounds read where options are validated (PlanOptions; `capplan plan --cpu-cores-per-gpu`)
    cpu_cores_per_gpu: Annotated[int, Field(ge=0)] = 8
    host_ram_gib_base: float = 16.0
    host_ram_per_gpu_memory: Annotated[float, Field(ge=0)] = 2.0

    def finding(self) -> Finding:
        """The rule as a finding (its English: `describe`)."""
        return Finding(
            key="plan.host_rule",
            values={
                "cores_base": self.cpu_cores_base,
                "cores_per_gpu": self.cpu_cores_per_gpu,
                "ram_base": self.host_ram_gib_base,
                "ram_per_memory": self.host_ram_per_gpu_memory,
            },
        )

    def describe(self) -> str:
        return self.finding().english()

    def cpu_cores(self, tp: int) -> int:
        return self.cpu_cores_base + self.cpu_cores_per_gpu * tp

    def host_ram_gib(self, tp: int, gpu_memory_bytes: int) -> float:
        return self.host_ram_gib_base + self.host_ram_per_gpu_memory * tp * gpu_memory_bytes / 2**30


def parse_float_list(text: str, option: str) -> list[float]:
    """`1.0,1.3,2` -> [1.0, 1.3, 2.0]. Raises ConfigError naming `option` for a bad entry."""
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(float(part))
        except ValueError as err:
            raise ConfigError(
                f"{option}: {part!r} is not a number (expected e.g. 1.0,1.3)"
            ) from err
    if not out:
        raise ConfigError(f"{option}: expected at least one number, e.g. 1.0,1.3")
    return out
