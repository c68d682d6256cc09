"""The limit search in virtual time: `planner.search` driven by the fleet simulator.

`SimulatorProbe` is a `planner.search.Probe` whose levels are one engine-model instance
replaying the profile's traffic (`planner.fleet.profile_requests` and `simulate_fleet`) at
the asked rate, so the search, its verdicts (`planner.slo.evaluate`) and its limit.json are
the same as against a live endpoint; only the clock is virtual. `virtual_limit` runs the
whole search for one engine configuration and keeps what the search's own result does not:
per-request latencies at the limit, split into short and long prompts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from planner.engine import EngineConfig
from planner.errors import ConfigError
from planner.fleet import (
    ArrivalKind,
    profile_requests,
    run_records,
    simulate_fleet,
    simulator_slo_problem,
)
from planner.search import AbandonRule, LevelMeasurement, SearchConfig, SearchResult, run_search
from planner.slo import Slo
from profiles.model import Profile


@dataclass
class SimulatorProbe:
    """Holds a rate on one simulated instance for `level_s` virtual seconds.

    Each measurement of the same rate draws new traffic (seed + repeat), as a repeated live
    level would meet other requests. Records carry `input_tokens` and `output_tokens` besides
    the SLO's columns. `abandon` is ignored: a simulated level costs little wall time.
    """

    profile: Profile
    config: EngineConfig
    level_s: float = 60.0
    warmup_frac: float = 0.2
    seed: int = 0
    arrival_kind: ArrivalKind = "gamma"
    simulated_requests: int = 0
    prompt_tokens: int = 0
    shared_prompt_tokens: int = 0  # in blocks an earlier request of the same level had
    records_by_load: dict[float, list[pl.DataFrame]] = field(default_factory=dict)

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        repeat = len(self.records_by_load.get(load, []))
        records = self.records(load, repeat)
        self.records_by_load.setdefault(load, []).append(records)
        return LevelMeasurement(
            load=load,
            stage=f"virtual-{load:g}rps-{repeat}",
            records=records,
            duration_s=self.level_s,
            warmup_s=self.warmup_frac * self.level_s,
            start_s=0.0,
        )

    def records(self, rate_rps: float, repeat: int = 0) -> pl.DataFrame:
        """One simulated level at `rate_rps`: per-request records in planner.slo's columns."""
        rng = np.random.default_rng(self.seed + 1000 * repeat)
        requests = profile_requests(
            self.profile,
            rate_rps,
            self.level_s,
            rng,
            self.config.effective_max_model_len,
            self.arrival_kind,
            block_tokens=self.config.block_tokens,
        )
        run = simulate_fleet(requests, self.config, 1)
        self.simulated_requests += len(requests)
        seen: set[int] = set()
        bt = self.config.block_tokens
        for r in requests:
            self.prompt_tokens += r.prompt_tokens
            self.shared_prompt_tokens += bt * sum(1 for h in r.block_hashes if h in seen)
            seen.update(r.block_hashes)
        inputs = sorted(((r.arrival_s, r.prompt_tokens) for r in requests), key=lambda x: x[0])
        return run_records(run).with_columns(
            pl.Series("input_tokens", [p for _, p in inputs], dtype=pl.Int64),
            pl.Series("output_tokens", run.output_tokens),
        )

    def judged(self, load: float) -> pl.DataFrame:
        """Every measured request of a level after its warm-up (empty when never measured)."""
        frames = self.records_by_load.get(load, [])
        if not frames:
            return pl.DataFrame()
        cut = self.warmup_frac * self.level_s
        return pl.concat(frames).filter(pl.col("arrival_s") >= cut)


@dataclass(frozen=True)
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

    A request that never finished counts as +infinity, as in every verdict.
    """
    classes = profile.lengths.classes

    def p99(mask: pl.Expr, column: str) -> float | None:
        if records.height == 0:
            return None
        values = records.filter(mask)[column].fill_null(np.inf).fill_nan(np.inf).to_numpy()
        return float(np.quantile(values, 0.99)) if len(values) else None

    short = pl.col("input_tokens") <= classes.short_max_tokens
    long = pl.col("input_tokens") >= classes.long_min_tokens
    return LatencySplit(
        p99(short, "ttft_s"),
        p99(long, "ttft_s"),
        p99(short, "e2e_s"),
        p99(long, "e2e_s"),
        classes.short_max_tokens,
        classes.long_min_tokens,
    )


@dataclass(frozen=True)
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
    from planner.engine import Engine, kv_capacity_tokens
    from planner.plan import mean_context_tokens

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
    decode_s = engine.step_time_s(batch, batch * context, int(batch * context), batch)
    per_request_s = prefill_s + mean_out * decode_s / batch / config.spec_tokens_per_step
    return 1.0 / per_request_s


def search_config(
    slo: Slo,
    start_rps: float = 1.0,
    tolerance: float = 0.05,
    seed: int = 0,
    max_rps: float = 4096.0,
) -> SearchConfig:
    """The search's knobs for virtual time: few bootstrap draws, one repeat, 20+ completions."""
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
        seed=seed,
    )


def virtual_limit(
    profile: Profile,
    config: EngineConfig,
    slo: Slo,
    *,
    level_s: float = 60.0,
    start_rps: float | None = None,
    tolerance: float = 0.05,
    seed: int = 0,
) -> VirtualLimit:
    """Run the limit search (`planner.search.run_search`) against one simulated instance.

    The search starts at `start_rps` (default: half the roofline's throughput ceiling) and
    never goes above 8 x that ceiling (an estimate, not a bound): an SLO without a
    queue-sensitive metric would pass there, and the result then says "passed at the maximum".

    Raises ConfigError for an SLO the simulator cannot judge or search knobs out of range.
    """
    problem = simulator_slo_problem(slo)
    if problem is not None:
        raise ConfigError(problem)
    wall0 = time.perf_counter()
    probe = SimulatorProbe(profile, config, level_s=level_s, seed=seed)
    ceiling = throughput_ceiling_rps(profile, config)
    start = start_rps if start_rps is not None else 0.5 * ceiling
    start = float(f"{min(start, 8.0 * ceiling):.3g}")
    config_ = search_config(slo, start, tolerance, seed, max_rps=8.0 * ceiling)
    result = run_search(probe, config_)
    at_limit = (
        probe.judged(result.feasible_max) if result.feasible_max is not None else pl.DataFrame()
    )
    share = probe.shared_prompt_tokens / probe.prompt_tokens if probe.prompt_tokens else 0.0
    return VirtualLimit(
        result, at_limit, probe.simulated_requests, time.perf_counter() - wall0, share
    )


def split_at(
    profile: Profile, config: EngineConfig, rate_rps: float, level_s: float = 60.0, seed: int = 0
) -> LatencySplit:
    """Short- and long-prompt P99s of one simulated level at `rate_rps` (after its warm-up)."""
    probe = SimulatorProbe(profile, config, level_s, seed=seed)
    probe.records_by_load[rate_rps] = [probe.records(rate_rps)]
    return latency_split(probe.judged(rate_rps), profile)
