"""What `capplan limit` was asked (`LimitOptions`), and its record in the run directory's
search.json (contracts.searchlog): the search's identity and the options that shape its
levels, written when the search starts and read back by `--resume`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from contracts.errors import ConfigError
from contracts.limit import Dimension
from contracts.searchlog import SearchIdentity, SearchLog
from planner.engine import EngineConfig
from planner.limit.measured.steady import SteadyRules
from planner.slo.recorded import ledger_slo
from planner.slo.spec import Slo

# Fields the identity holds, and those that are no option of the search (the run directory)
_IN_IDENTITY = frozenset({"host", "model", "slo", "profile", "dimension", "method", "seed"})
_NOT_RECORDED = frozenset({"out_dir", "api_key_env"})  # the key's variable: given each time
# Options a resumed run may change: how the load is generated, not what the levels are
FREE_ON_RESUME = frozenset({"workers", "master_bind", "expect_workers", "api_key_env"})


@dataclass(frozen=True)
class LimitOptions:
    """What `capplan limit` was asked (validated by the command and by SearchConfig)."""

    host: str
    model: str
    slo: Slo  # parsed once where the text came in (the CLI, or planner.slo.recorded)
    out_dir: Path
    profile: str | None = None
    dimension: Dimension = "rate"
    start: float | None = None
    max_load: float | None = None
    level_duration_s: float = 30.0  # the shortest measured window of a level
    warmup_s: float | None = None  # the shortest warm-up (None: SteadyRules' default)
    max_level_s: float = 900.0  # a level that has not settled by then fails as unstable
    hold_budget_s: float = 180.0  # the fast answer's hold level, before stepping down
    level_requests: int = 100  # the fewest requests a level's window holds
    effective_requests: float | None = None  # independent ones (None: SteadyRules' default)
    tail_requests: float | None = None  # independent ones in the SLO's tail (None: default)
    steady_rules: SteadyRules | None = None  # all the level rules at once (the demo's)
    growth: float = 2.0  # bracketing factor between levels until one fails
    time_scale: float = 1.0  # the endpoint runs this many times faster than wall time
    arrival: str = "poisson"
    tolerance: float = 0.05
    verify_burst: bool = False
    workers: int = 0
    master_bind: str | None = None  # HOST:PORT: the master alone, workers on other hosts
    expect_workers: int = 0
    seed: int = 0
    endpoint: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = None
    min_completed: int = 50
    max_repeats: int = 5
    max_levels: int = 24
    drain_s: float | None = None
    # steady stage of --verify-burst; None: 4 levels' worth, at least 60 s
    verify_steady_s: float | None = None
    method: Literal["measured", "fast"] = "fast"  # as `capplan limit --method` (issue 47)
    # the endpoint's engine (calibrated, or the emulator's): the fast search predicts with
    # it instead of characterising the server in closed loop
    engine: EngineConfig | None = None

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
        for f in fields(self):
            if f.name in _IN_IDENTITY or f.name in _NOT_RECORDED:
                continue
            value = getattr(self, f.name)
            if isinstance(value, SteadyRules | EngineConfig):
                value = value.model_dump(mode="json")
            out[f.name] = value
        return out


def recorded_options(log: SearchLog, out_dir: Path) -> LimitOptions:
    """The LimitOptions search.json recorded, for the run directory `out_dir`. Raises
    ConfigError when it holds an option this version does not have."""
    ident = log.identity
    given = dict(log.options)
    unknown = sorted(set(given) - {f.name for f in fields(LimitOptions)})
    if unknown:
        raise ConfigError(
            f"{out_dir}: search.json holds options this capplan does not know "
            f"({', '.join(unknown)}): it was written by another version; start a new run"
        )
    rules, engine = given.pop("steady_rules", None), given.pop("engine", None)
    profile = None if ident.profile_source == "preset:chat" else ident.profile_source
    return LimitOptions(
        host=ident.host,
        model=ident.model,
        slo=ledger_slo(ident),
        out_dir=out_dir,
        profile=profile,
        dimension=ident.dimension,
        method=ident.method,
        seed=ident.seed,
        steady_rules=None if rules is None else SteadyRules.model_validate(rules),
        engine=None if engine is None else EngineConfig.model_validate(engine),
        **given,
    )
