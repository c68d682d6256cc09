"""What `capplan profile` was asked: each option's bound and default declared once here.

The CLI builds `ProfileOptions` with `capplan.cli.build_options` (a refused value is one
`error:` line naming the option, exit 2). It hands each reader its typed slice: `read_args`
to `profiles.build.build_profile`, `figures` (a `PresetFigures`) to
`profiles.presets.preset_profile`, `prom_source` to the Prometheus reader. This module imports
no reader, so the log's digest can start before they load (capplan.commands.profile).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.errors import ConfigError, InputError

if TYPE_CHECKING:
    from profiles.prometheus.build import PromSource

PROMETHEUS = "prometheus:"


class PresetFigures(BaseModel):
    """The user's figures a preset is adjusted by (`preset_profile` says how); None: the
    preset's own. Each bound is declared once here; `preset_profile` holds its callers to it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    rate_rps: Annotated[float | None, Field(gt=0)] = Field(
        default=None, description="every rate scales to this mean, req/s"
    )
    peak_to_mean: Annotated[float | None, Field(ge=1)] = Field(
        default=None, description="the 60 s peak rate over the mean"
    )
    input_mean: Annotated[float | None, Field(gt=0)] = Field(
        default=None, description="mean input tokens"
    )
    output_mean: Annotated[float | None, Field(gt=0)] = Field(
        default=None, description="mean output tokens"
    )
    shared_prefix_tokens: Annotated[int | None, Field(ge=1)] = Field(
        default=None, description="tokens of one shared prompt prefix"
    )
    shared_prefix_share: Annotated[float | None, Field(gt=0, le=1)] = Field(
        default=None, description="share of requests that start with it"
    )

    @model_validator(mode="after")
    def _prefix_together(self) -> PresetFigures:
        if (self.shared_prefix_tokens is None) != (self.shared_prefix_share is None):
            raise ConfigError("--shared-prefix-tokens and --shared-prefix-share go together")
        return self

    def given(self) -> list[str]:
        """The figures set, by field name."""
        return [name for name, value in self if value is not None]


class ProfileOptions(BaseModel):
    """One profile: its source (logs, partial profiles, a preset or Prometheus), how the logs
    are read, and what is written."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    logs: list[str] = Field(
        default_factory=list, description="files, globs, URLs, sample:NAME or prometheus:URL"
    )
    output: Path = Field(description="PROFILE.json to write")
    log_format: str = Field(default="auto", description="the logs' format; auto: detected")
    columns: str | None = Field(default=None, description="a table's column names by role")
    group_by: str | None = Field(default=None, description="also profile each value of it")
    tokenizer: Path | None = Field(default=None, description="None: approximate token counts")
    block_tokens: int = Field(default=16, ge=1, description="prefix-cache block size")
    cache_tokens: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None, description="cache sizes of the LRU hit-ratio curve"
    )
    time_unit: str = Field(default="auto", description="numeric timestamps' unit")
    plots: Path | None = Field(default=None, description="folder for the PNG charts")
    seed: int = Field(default=0, description="the (input, output) pair sampler's seed")
    preset: str | None = Field(default=None, description="a built-in profile instead of logs")
    figures: PresetFigures = Field(
        default_factory=PresetFigures, description="the preset's adjustment"
    )
    chunk_rows: int | None = Field(default=None, ge=1, description="None: by the log's size")
    quiet: bool = Field(default=False, description="no summary table")
    match: str = Field(default="", description="prometheus: the engines' label selector")
    since: str = Field(default="7d", description="prometheus: start")
    until: str | None = Field(default=None, description="prometheus: end; None: now")
    step: str = Field(default="15s", description="prometheus: query resolution")
    metric_names: str = Field(default="auto", description="prometheus: whose metric names")
    token_env: str | None = Field(default=None, description="prometheus: bearer token variable")
    basic_auth_env: str | None = Field(
        default=None, description="prometheus: USER:PASSWORD variable"
    )
    merge: bool = Field(default=False, description="the logs are partial profiles to merge")
    burstiness: float | None = Field(
        default=None,
        gt=0,
        description="a lengths table sent at --rate-rps: the gamma shape of its gaps (vLLM's "
        "--burstiness; 1: Poisson)",
    )

    @model_validator(mode="after")
    def _prometheus_alone(self) -> ProfileOptions:
        if len(self.logs) > 1 and any(x.startswith(PROMETHEUS) for x in self.logs):
            raise InputError("prometheus:URL is a source of its own: give it alone")
        return self

    def prom_source(self) -> PromSource | None:
        """What the Prometheus reader reads, or None when the source is no prometheus:URL."""
        if len(self.logs) != 1 or not self.logs[0].startswith(PROMETHEUS):
            return None
        from profiles.prometheus.build import PromSource

        return PromSource(
            url=self.logs[0].removeprefix(PROMETHEUS), match=self.match, since=self.since,
            until=self.until, step=self.step, engine=self.metric_names,
            token_env=self.token_env, basic_auth_env=self.basic_auth_env,
        )  # fmt: skip

    def read_args(self) -> dict[str, Any]:
        """`build_profile`'s keyword arguments: how the logs are read and profiled."""
        from profiles.readers.base import ArrivalDraw  # the log path's import, not the CLI's

        return {
            "fmt": self.log_format,
            "columns": self.columns,
            "group_by": self.group_by,
            "tokenizer": str(self.tokenizer) if self.tokenizer else None,
            "block_tokens": self.block_tokens,
            "cache_tokens": self.cache_tokens,
            "seed": self.seed,
            "time_unit": self.time_unit,
            "chunk_rows": self.chunk_rows,
            "draw": None
            if self.figures.rate_rps is None
            else ArrivalDraw(self.figures.rate_rps, self.burstiness or 1.0, self.seed),
        }
