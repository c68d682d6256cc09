"""What `capplan limit` was asked (`LimitOptions`, each option's bound and default declared
once), the slice of it each layer runs with (the level rules, the measured search's, the fast
search's and the load test's configs), and its record in the run directory's search.json
(contracts.searchlog): the search's identity and the options that shape its levels, written
when the search starts and read back by `--resume`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import ConfigError
from contracts.limit import Dimension
from contracts.options import build
from contracts.searchlog import SearchIdentity, SearchLog
from planner.engine import EngineConfig
from planner.limit.fast.steps import FastConfig
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.steady import SteadyRules
from planner.loadtest.run import LoadTestConfig
from planner.slo.recorded import ledger_slo
from planner.slo.spec import SloField

# Fields the identity holds, and those that are no option of the search (the run directory)
_IN_IDENTITY = frozenset({"host", "model", "slo", "profile", "dimension", "method", "seed"})
_NOT_RECORDED = frozenset({"out_dir", "api_key_env"})  # the key's variable: given each time
# Options a resumed run may change: how the load is generated, not what the levels are
FREE_ON_RESUME = frozenset({"workers", "master_bind", "expect_workers", "api_key_env"})
DEFAULT_START = 1.0  # the first level when --start is not given (1 req/s or 1 user)
DEFAULT_MAX_LOAD = 4096.0  # the highest level when --max is not given


class LimitOptions(BaseModel):
    """What `capplan limit` was asked: every option's bound and default, held here once (the
    CLI's parameters only spell them: tests/capplan/test_options_drift.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    host: str
    model: str
    # parsed once where the text came in (the CLI, or planner.slo.recorded), success_only kept
    slo: SloField
    out_dir: Path
    profile: str | None = None
    dimension: Dimension = "rate"
    start: float | None = Field(default=None, gt=0, description="the first level")
    max_load: float | None = Field(default=None, gt=0, description="the highest level")
    level_duration_s: float = Field(
        default=30.0, gt=0, description="the shortest measured window of a level"
    )
    warmup_s: float | None = Field(
        default=None, ge=0, description="the shortest warm-up (None: SteadyRules' default)"
    )
    max_level_s: float = Field(
        default=900.0, gt=0, description="a level not settled by then fails as unstable"
    )
    hold_budget_s: float = Field(
        default=180.0, gt=0, description="the fast answer's hold level, before stepping down"
    )
    level_requests: int = Field(
        default=100, ge=1, description="the fewest requests a level's window holds"
    )
    effective_requests: float | None = Field(
        default=None, ge=0, description="independent ones (None: SteadyRules' default; 0: none)"
    )
    tail_requests: float | None = Field(
        default=None, ge=0, description="independent ones in the SLO's tail (None: default)"
    )
    steady_rules: SteadyRules | None = Field(
        default=None, description="all the level rules at once (the demo's)"
    )
    growth: float = Field(default=2.0, description="bracketing factor until a level fails")
    time_scale: float = Field(
        default=1.0, gt=0, description="the endpoint runs this many times faster than wall time"
    )
    arrival: str = "poisson"
    tolerance: float = Field(default=0.05, gt=0, lt=1)
    verify_burst: bool = False
    workers: int = Field(default=0, ge=0)
    master_bind: str | None = Field(
        default=None, description="HOST:PORT: the master alone, workers on other hosts"
    )
    expect_workers: int = Field(default=0, ge=0)
    seed: int = 0
    endpoint: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = None
    min_completed: int = Field(default=50, ge=0)
    max_repeats: int = 5
    max_levels: int = Field(default=24, ge=1)
    drain_s: float | None = None
    verify_steady_s: float | None = Field(
        default=None, description="steady stage of verify_burst; None: 4 levels', >= 60 s"
    )
    method: Literal["measured", "fast"] = "fast"  # as `capplan limit --method` (issue 47)
    engine: EngineConfig | None = Field(
        default=None,
        description="the endpoint's engine (calibrated, or the emulator's): the fast search "
        "predicts with it instead of characterising the server in closed loop",
    )

    def rules(self) -> SteadyRules:
        """The steady-state rules of each level (planner.limit.measured.steady)."""
        if self.steady_rules is not None:
            return self.steady_rules
        given: dict[str, float] = {
            "min_window_s": self.level_duration_s,
            "max_level_s": self.max_level_s,
            "min_window_requests": self.level_requests,
        }
        if self.warmup_s is not None:
            given["min_warmup_s"] = self.warmup_s
        if self.effective_requests is not None:
            given["effective_requests"] = self.effective_requests
        if self.tail_requests is not None:
            given["tail_requests"] = self.tail_requests
        return SteadyRules.model_validate(given)

    def search_config(self) -> SearchConfig:
        """The measured search's knobs (planner.limit.measured.config; its ConfigError for a
        pair out of order, e.g. --max below --start). A deciding level's runs, all together,
        last at most as long as one level may."""
        return SearchConfig(
            slo=self.slo,
            dimension=self.dimension,
            start=self.start if self.start is not None else DEFAULT_START,
            max_load=self.max_load if self.max_load is not None else DEFAULT_MAX_LOAD,
            tolerance=self.tolerance,
            min_completed=self.min_completed,
            max_repeats=self.max_repeats,
            max_pooled_s=self.rules().max_level_s,
            hold_budget_s=self.hold_budget_s,
            max_levels=self.max_levels,
            growth=self.growth,
            seed=self.seed,
        )

    def fast_config(self, curve_requests: int | None = None) -> FastConfig:
        """The fast search's knobs (planner.limit.fast.steps): the limit's 90 % interval
        within 0.6 x the tolerance on either side (3 % at the default 5 %); the level
        duration sets the confirmation chunks and a third of it the closed-loop steps.
        `curve_requests`: the model's curve length (None: FastConfig's)."""
        return FastConfig(
            slo=self.slo,
            tolerance=self.tolerance,
            half_width=0.6 * self.tolerance,
            seed=self.seed,
            chunk_s=self.level_duration_s,
            step_s=self.level_duration_s / 3,
            curve_requests=FastConfig.curve_requests if curve_requests is None else curve_requests,
        )

    def load_test_config(self) -> LoadTestConfig:
        """How each level's load is generated (planner.loadtest.run). After a level ends,
        in-flight requests get as long as the SLO's longest wait (unless `drain_s`): past it
        a request still running is a known miss, so censoring it at its age decides nothing."""
        longest = self.slo.longest_wait_s
        drain_s = self.drain_s
        if drain_s is None:
            drain_s = longest + 1.0 if longest is not None else max(self.level_duration_s, 10.0)
        return LoadTestConfig(
            host=self.host,
            model=self.model,
            endpoint=self.endpoint,
            profile_path=self.profile,
            api_key_env=self.api_key_env,
            seed=self.seed,
            workers=self.workers,
            master_bind=self.master_bind,
            expect_workers=self.expect_workers,
            slo_ttft_s=self.slo.ttft_bound_s,
            slo=self.slo,
            drain_s=drain_s,
            time_scale=self.time_scale,
        )

    def identity(self, profile_digest: str) -> SearchIdentity:
        """What a resumed search must share with this one (`profile_digest`: the profile's)."""
        return SearchIdentity(
            host=self.host,
            model=self.model,
            profile_source=self.profile or "preset:chat",
            profile_digest=profile_digest,
            slo=self.slo.text,
            success_only=self.slo.success_only,
            dimension=self.dimension,
            method=self.method,
            seed=self.seed,
        )

    def recorded(self) -> dict[str, Any]:
        """The options outside the identity, as JSON values (search.json's `options`)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name in _IN_IDENTITY or name in _NOT_RECORDED:
                continue
            value = getattr(self, name)
            if isinstance(value, SteadyRules | EngineConfig):
                value = value.model_dump(mode="json")
            out[name] = value
        return out


def recorded_options(log: SearchLog, out_dir: Path) -> LimitOptions:
    """The LimitOptions search.json recorded, for the run directory `out_dir`. Raises
    ConfigError when it holds an option this version does not have, or a value out of the
    option's bound (naming it)."""
    ident = log.identity
    given = dict(log.options)
    unknown = sorted(set(given) - set(LimitOptions.model_fields))
    if unknown:
        raise ConfigError(
            f"{out_dir}: search.json holds options this capplan does not know "
            f"({', '.join(unknown)}): it was written by another version; start a new run"
        )
    profile = None if ident.profile_source == "preset:chat" else ident.profile_source
    return build(
        LimitOptions,
        lambda path: f"{out_dir}: search.json's option {path}",
        host=ident.host,
        model=ident.model,
        slo=ledger_slo(ident),
        out_dir=out_dir,
        profile=profile,
        dimension=ident.dimension,
        method=ident.method,
        seed=ident.seed,
        **given,  # the level rules and the engine as their JSON: validated into their models
    )
