"""The limit search in virtual time for what-if candidates.

`virtual_limit` runs `planner.limit.measured.search` against `planner.limit.predict.EngineProbe`
(one engine-model instance replaying the profile's traffic) with `rules`, capplan limit's
steady-state rules (the default of `capplan whatif`), or without them fixed levels (quicker,
possibly optimistic: `--level-duration`), so the search, its verdicts and its limit are those of a
live endpoint; only the clock is virtual. It keeps what the search's own result does not:
per-request latencies at the limit, split into short and long prompts, and the replayed
prefix reuse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from contracts.latency import quantile, request_values
from planner.engine import EngineConfig
from planner.fleet.sim import (
    simulator_slo_problem,
)
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.search import SearchResult, run_search
from planner.limit.measured.steady import SteadyRules
from planner.limit.predict import EngineProbe
from planner.slo.spec import Slo
from planner.whatif.disagg import Disagg, DisaggProbe
from profiles.model import Profile

# How often the steady-state watcher looks at a simulated level (virtual seconds): a level
# ends at most this much later than a live watcher checking every second would end it, which
# only lengthens it (never an optimistic verdict), at a fifth of the watcher's cost.
WATCH_EVERY_S = 5.0


@dataclass(frozen=True, kw_only=True)
class LatencySplit:
    """P99 TTFT and E2E of short and long prompts (the profile's length classes), seconds."""

    short_ttft_p99_s: float | None
    long_ttft_p99_s: float | None
    short_e2e_p99_s: float | None
    long_e2e_p99_s: float | None
    short_max_tokens: int
    long_min_tokens: int


def latency_split(records: pl.DataFrame, profile: Profile) -> LatencySplit:
    """P99s of short (input <= the profile's short bound) and long (>= long bound) requests.

    A request counts as in every verdict (`contracts.latency.request_values`): a failed one
    +infinity, one the level's drain cut short at its age (a lower bound).
    """
    classes = profile.lengths.classes

    def p99(mask: pl.Expr, column: str) -> float | None:
        if records.height == 0:
            return None
        values = request_values(records.filter(mask), column.removesuffix("_s"))
        return float(quantile(values, 0.99)) if len(values) else None

    short = pl.col("input_tokens") <= classes.short_max_tokens
    long = pl.col("input_tokens") >= classes.long_min_tokens
    return LatencySplit(
        short_ttft_p99_s=p99(short, "ttft_s"),
        long_ttft_p99_s=p99(long, "ttft_s"),
        short_e2e_p99_s=p99(short, "e2e_s"),
        long_e2e_p99_s=p99(long, "e2e_s"),
        short_max_tokens=classes.short_max_tokens,
        long_min_tokens=classes.long_min_tokens,
    )


@dataclass(frozen=True, kw_only=True)
class VirtualLimit:
    """One configuration's limit found by the search in virtual time, with what it rests on."""

    search: SearchResult
    at_limit: pl.DataFrame  # judged requests of the highest passing level (empty when none)
    simulated_requests: int
    wall_s: float
    shared_prompt_share: float  # of replayed prompt tokens, in blocks seen before in a level

    @property
    def limit_rps(self) -> float | None:
        return self.search.feasible_max


def throughput_ceiling_rps(profile: Profile, config: EngineConfig) -> float:
    """A rate one instance cannot exceed in steady state, from the roofline alone.

    Each request needs its prefill (the mean prompt in one step) and its share of full decode
    steps: max_num_seqs sequences (fewer when the KV cache holds fewer mean contexts) at the
    mean context, each step emitting one token per sequence (more under speculative
    decoding); with prefix caching, the profile's ideal hit ratio of prompt tokens is not
    computed again. 1 / (prefill time + mean output x decode step time / batch) bounds the rate;
    the search never needs to look far above it.
    """
    from planner.capacity.plan import mean_context_tokens
    from planner.engine import Engine, kv_capacity_tokens

    pairs = profile.lengths.sampler.pairs
    mean_in = float(np.mean([p[0] for p in pairs]))
    mean_out = float(np.mean([p[1] for p in pairs]))
    context = mean_context_tokens(pairs)
    batch = max(1, min(config.max_num_seqs, int(kv_capacity_tokens(config) / max(context, 1.0))))
    engine = Engine(config, token_events=False)
    # A prefill rides along the decode steps: count only its own compute.
    hit = (profile.prefix.ideal_hit_ratio or 0.0) if config.prefix_caching else 0.0
    prefill_s = (1.0 - hit) * max(
        0.0,
        engine.step_time_s(int(mean_in), mean_in * mean_in / 2, int(mean_in), 0)
        - engine.step_time_s(0, 0.0, 0, 0),
    )
    decode_pairs = batch * context
    decode_s = engine.step_time_s(
        batch, decode_pairs, int(decode_pairs), batch, decode_pairs=decode_pairs
    )
    per_request_s = prefill_s + mean_out * decode_s / batch / config.spec_tokens_per_step
    return 1.0 / per_request_s


def search_config(
    slo: Slo,
    start_rps: float = 1.0,
    tolerance: float = 0.05,
    seed: int = 0,
    max_rps: float = 4096.0,
) -> SearchConfig:
    """The search's knobs for virtual time: few bootstrap draws, one repeat, 20+ completions.

    Any pass counts: a what-if ranks candidates by the model's central estimate, where
    `capplan limit` (and the demo's prediction beside it) keep only certain passes because a
    plan rests on a measured limit."""
    return SearchConfig(
        slo=slo,
        dimension="rate",
        start=start_rps,
        max_load=max(max_rps, start_rps),
        tolerance=tolerance,
        min_completed=20,
        max_repeats=1,
        max_levels=16,
        resamples=60,
        certain_pass=False,
        seed=seed,
    )


def virtual_limit(
    profile: Profile,
    config: EngineConfig,
    slo: Slo,
    *,
    rules: SteadyRules | None = None,
    level_s: float = 60.0,
    start_rps: float | None = None,
    tolerance: float = 0.05,
    seed: int = 0,
    disagg: Disagg | None = None,
) -> VirtualLimit:
    """Run the limit search (`planner.limit.measured.search.run_search`) against one simulated
    instance, or one disaggregated unit of prefill and decode instances (`disagg`).

    The search starts at `start_rps` (default: half the roofline's throughput ceiling, times
    the unit's instances) and never goes above 8 x that ceiling (an estimate, not a bound):
    an SLO without a queue-sensitive metric would pass there, and the result then says
    "passed at the maximum".

    Raises ConfigError for an SLO the simulator cannot judge or search knobs out of range.
    """
    problem = simulator_slo_problem(slo)
    if problem is not None:
        raise ConfigError(problem.english())
    wall0 = time.perf_counter()
    probe = DisaggProbe(
        profile=profile,
        config=config,
        rules=rules,
        slo=slo,
        arrival_kind="gamma",
        drain_s=(slo.longest_wait_s or 9.0) + 1.0,
        seed=seed,
        level_s=level_s,
        disagg=disagg,
        check_every_s=WATCH_EVERY_S,
        hold_window_requests=True,
    )
    ceiling = throughput_ceiling_rps(profile, config) * (disagg.instances if disagg else 1)
    start = start_rps if start_rps is not None else 0.5 * ceiling
    start = float(f"{min(start, 8.0 * ceiling):.3g}")
    config_ = search_config(slo, start, tolerance, seed, max_rps=8.0 * ceiling)
    result = run_search(probe, config_)
    at_limit = (
        probe.judged(result.feasible_max) if result.feasible_max is not None else pl.DataFrame()
    )
    share = probe.shared_prompt_tokens / probe.prompt_tokens if probe.prompt_tokens else 0.0
    return VirtualLimit(
        search=result,
        at_limit=at_limit,
        simulated_requests=probe.simulated_requests,
        wall_s=time.perf_counter() - wall0,
        shared_prompt_share=share,
    )


def split_at(
    profile: Profile,
    config: EngineConfig,
    slo: Slo,
    rate_rps: float,
    rules: SteadyRules | None = None,
    seed: int = 0,
    level_s: float = 60.0,
) -> LatencySplit:
    """Short- and long-prompt P99s of one simulated level at `rate_rps` (steady with
    `rules`, else a fixed `level_s` after its warm-up)."""
    probe = EngineProbe(
        profile=profile,
        config=config,
        rules=rules,
        slo=slo,
        arrival_kind="gamma",
        seed=seed,
        level_s=level_s,
    )
    probe.measure(rate_rps)
    return latency_split(probe.judged(rate_rps), profile)
