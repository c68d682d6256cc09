"""The review file (YAML): the services of a quarterly capacity review, validated once here.

A bad file fails with one InputError naming the file, the service and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from contracts.errors import ConfigError, InputError
from planner.slo.spec import SloField


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricsSpec(_Model):
    """How a `prometheus:URL` profile reads the engines' metrics (as `capplan profile`)."""

    match: str = Field(default="", description='label selector, e.g. {job="vllm"}')
    since: str = Field(default="90d", description="start: a duration before until, ISO or epoch")
    until: str | None = Field(default=None, description="end (default now)")
    step: str = Field(default="15s", description="query resolution (the scrape interval)")
    engine: str = Field(default="auto", description="auto|vllm|vllm-v0|sglang|tgi")
    token_env: str | None = Field(default=None, description="env variable with a bearer token")
    basic_auth_env: str | None = Field(default=None, description="env variable with USER:PASS")


class ServiceSpec(_Model):
    """One LLM service of the review."""

    name: str = Field(min_length=1, description="service name, unique in the review")
    profile: str | None = Field(
        default=None,
        description="profile JSON path, 'sample:NAME' (shipped log, profiled), 'preset:NAME' "
        "or 'prometheus:URL' (the engines' metrics; with match, since, ...)",
    )
    match: str | None = Field(default=None, description="prometheus: label selector")
    since: str | None = Field(default=None, description="prometheus: start (default 90d)")
    until: str | None = Field(default=None, description="prometheus: end (default now)")
    step: str | None = Field(default=None, description="prometheus: resolution (default 15s)")
    engine: str | None = Field(default=None, description="prometheus: engine (default auto)")
    token_env: str | None = Field(default=None, description="prometheus: bearer token variable")
    basic_auth_env: str | None = Field(default=None, description="prometheus: USER:PASS variable")
    logs: list[str] | None = Field(default=None, description="request logs to profile instead")
    limit: str = Field(description="limit.json path or a number with its unit: 17.4rps, 50users")
    slo: SloField | None = Field(default=None, description="SLO spec (default: the limit.json's)")
    gpu: str = "H100-80GB"
    model: str = "llama-3.1-8b"
    tp: int = Field(default=1, ge=1, description="GPUs per instance")
    growth: float | None = Field(
        default=None, gt=0, description="growth factor; default: the trend of the logs, else 1"
    )
    headroom: float = Field(
        default=0.2, ge=0, description="spare share above the peak: a fraction (0.2) or '20%'"
    )
    redundancy: int = Field(default=1, ge=0, description="spare instances (N+k)")
    gpu_hour_price_usd: float | None = Field(default=None, gt=0)
    peak_window: str = "60s"
    peak_quantile: float = Field(default=0.99, ge=0, le=1)
    accept_unconfirmed: bool = Field(
        default=False,
        description="take a limit.json whose answer is unconfirmed (a search stopped before it "
        "confirmed it), as capplan plan --accept-unconfirmed does",
    )

    @field_validator("slo", mode="wrap")
    @classmethod
    def _slo_named(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ConfigError as err:  # reported with the file, the service and the field
            raise ValueError(str(err)) from err

    @field_validator("limit", mode="before")
    @classmethod
    def _limit_text(cls, value: Any) -> Any:
        # YAML reads `limit: 2` as a number; parse_limit then asks for its unit.
        return str(value) if isinstance(value, int | float) else value

    @field_validator("headroom", mode="before")
    @classmethod
    def _headroom_share(cls, value: Any) -> Any:
        # `headroom: 20` meant 20 %, not 2000 %: as `capplan plan --headroom`, a bare number
        # is a fraction (at most 1) and a percent says so.
        if isinstance(value, str) and value.strip().endswith("%"):
            return float(value.strip()[:-1]) / 100.0  # a ValueError names the field
        if isinstance(value, int | float) and value > 1:
            raise ValueError(
                f"a fraction is at most 1; for {value:g} percent write '{value:g}%' "
                f"(or {value / 100:g})"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ServiceSpec:
        if (self.profile is None) == (self.logs is None):
            raise ValueError("give exactly one of profile or logs")
        given = [k for k in _METRICS_KEYS if getattr(self, k) is not None]
        if given and not (self.profile or "").startswith("prometheus:"):
            raise ValueError(f"{given[0]} applies only to a 'prometheus:URL' profile")
        return self

    @property
    def metrics(self) -> MetricsSpec:
        """The Prometheus options given, defaults for the rest."""
        return MetricsSpec(
            **{k: getattr(self, k) for k in _METRICS_KEYS if getattr(self, k) is not None}
        )


_METRICS_KEYS = ("match", "since", "until", "step", "engine", "token_env", "basic_auth_env")


class ReviewSpec(_Model):
    """The whole review file."""

    name: str = Field(default="", description="e.g. 2026-Q4 (default: the output's name)")
    confidence: float = Field(default=0.9, gt=0, lt=1, description="level of every interval")
    scale_up_delay_s: float = Field(
        default=300.0, ge=0, description="model load time of a new instance (autoscaled fleet)"
    )
    fleet_check: bool = Field(default=False, description="simulate each service's fleet")
    autoscale: bool = Field(
        default=False,
        description="simulate autoscaling policies per service (as capplan plan --autoscale; "
        "cold start: scale_up_delay_s)",
    )
    seed: int = 0
    services: list[ServiceSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> ReviewSpec:
        names = [s.name for s in self.services]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"service names must be unique; repeated: {', '.join(dup)}")
        return self


def _where(data: Any, loc: tuple[Any, ...]) -> str:
    """'service 'chat', field limit' for a pydantic location inside `services`."""
    if len(loc) >= 2 and loc[0] == "services" and isinstance(loc[1], int):
        name = None
        services = data.get("services") if isinstance(data, dict) else None
        if isinstance(services, list) and loc[1] < len(services):
            entry = services[loc[1]]
            name = entry.get("name") if isinstance(entry, dict) else None
        who = f"service {name!r}" if name else f"service #{loc[1] + 1}"
        field = ".".join(str(x) for x in loc[2:]) or "(the entry)"
        return f"{who}, field {field}"
    return "field " + (".".join(str(x) for x in loc) or "(top level)")


def parse_review(data: Any, path: Path) -> ReviewSpec:
    """`data` (parsed YAML) as a ReviewSpec; InputError naming the service and field."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with a 'services' list")
    try:
        return ReviewSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        raise InputError(f"{path}: {_where(data, tuple(first['loc']))}: {msg}") from err


def load_review(path: Path) -> ReviewSpec:
    """Read and validate the review file; InputError for a missing, unparsable or bad file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise InputError(f"{path}: review file not found") from err
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the review file ({err})") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({err})") from err
    return parse_review(data, path)
