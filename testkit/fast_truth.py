"""The fast limit search (planner.limit.fast) and today's measured one
(planner.limit.measured.search) on the same simulated servers, against the servers' truth: used by
bench/search_truth.py.

Truth: for a plain slot server, the M/G/c simulation of testkit/queue_truth.py (Erlang-B
when it refuses); for one that departs from the model (slowdown with load, prefill
contention), a long open-loop run of testkit/sim_server.py itself, bisected on the rate.
Neither uses capplan's model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from planner.engine import EngineRequest, build_engine_config
from planner.limit.fast.characterise import build_model
from planner.limit.fast.model import ServerModel
from planner.limit.fast.result import seeded
from planner.limit.fast.search import Characterise
from planner.limit.fast.steps import FastConfig, FastResult
from planner.limit.measured.config import SearchConfig
from planner.limit.measured.search import run_search
from planner.limit.measured.steady import SteadyRules
from planner.limit.predict import EngineProbe, simulated_records
from planner.limit.probe import AbandonRule, LevelMeasurement
from planner.slo.spec import parse_slo
from profiles.presets import preset_profile
from testkit.fast_driver import asked_of, run_fast
from testkit.queue_truth import fcfs_waits, loss_max_rate, mgc_max_rate
from testkit.sim_server import ServerSpec, serve_open


@dataclass(frozen=True)
class Case:
    """A server and a `ttft:p{q}<=T` SLO; `slots_error` misstates the model's slot count
    by that factor after characterisation (a wrong slot count)."""

    name: str
    spec: ServerSpec
    ttft_s: float
    quantile: float = 0.95
    slots_error: float = 1.0

    @property
    def slo(self) -> str:
        return f"ttft:p{self.quantile * 100:g}<={self.ttft_s:g}s"

    @property
    def plain(self) -> bool:
        return self.spec.slowdown == 0 and not self.spec.serial_prefill

    def characterise(self) -> Characterise:
        if self.slots_error == 1.0:
            return build_model

        def wrong(*args: object) -> ServerModel:
            model = build_model(*args)  # type: ignore[arg-type]
            slots = max(1, round(model.slots * self.slots_error))
            slowdown = (model.slowdown + (model.slowdown[-1],) * slots)[:slots]
            return replace(model, slots=slots, slowdown=slowdown)

        return wrong


def truth(case: Case, *, arrivals: int = 40_000, queue_arrivals: int = 200_000) -> float:
    """The case's limit. Lognormal answer lengths (the grid's spreads) get a million arrivals,
    each with its own draw: with 200,000 arrivals resampling 20,000 draws the M/G/c truth
    came 0.7-1.2 % low at CV 1 and 2 (16 slots), against two million-arrival runs 0.2-1.2 %
    apart. `queue_arrivals`: the M/G/c run's arrivals otherwise (fewer for a fast test)."""
    spec = case.spec
    rng = np.random.default_rng(12345)
    lognormal = spec.tokens_cv is not None
    draws, queue_arrivals = (1_000_000, 1_000_000) if lognormal else (20_000, queue_arrivals)
    tokens = spec.draw_tokens(rng, draws)
    # the load the limit is for is open loop: the server's open-loop work (`open_loop_work`)
    service = spec.open_loop_work * (spec.prefill_s + tokens * spec.per_token_s)
    if case.plain and spec.refuse:
        return loss_max_rate(spec.slots, float(service.mean()), case.quantile)
    if case.plain:
        first = np.full(service.size, spec.open_loop_work * spec.prefill_s)
        return mgc_max_rate(service, first, spec.slots, case.ttft_s, case.quantile,
                            arrivals=queue_arrivals)  # fmt: skip
    gaps = np.cumsum(rng.exponential(1.0, arrivals))
    drawn = spec.draw_tokens(rng, arrivals)
    skip = arrivals // 10

    def holds(rate: float) -> bool:
        ttft, _ = serve_open(spec, gaps / rate, drawn)
        values = np.where(np.isnan(ttft), np.inf, ttft)[skip:]
        return float(np.quantile(values, case.quantile)) <= case.ttft_s

    low, high = 0.1 * spec.capacity_rps, 1.2 * spec.capacity_rps
    while high - low > 0.003 * low:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if holds(mid) else (low, mid)
    return low


@dataclass(kw_only=True)
class SpecProbe(EngineProbe):
    """capplan's measured search holding levels on a simulated server in virtual time."""

    spec: ServerSpec = field(default_factory=lambda: ServerSpec(8, 0.05, 0.01, (32, 96)))
    _tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    took_s: float = 0.0

    def measure(self, load: float, *, abandon: AbandonRule | None = None) -> LevelMeasurement:
        rng = np.random.default_rng([self.seed, self.levels + 1, 7])
        cap_s = self.rules.max_level_s if self.rules is not None else self.level_s
        self._tokens = self.spec.draw_tokens(rng, int(load * cap_s * 2) + 1000)
        measurement = super().measure(load, abandon=abandon)
        self.took_s += measurement.duration_s + self.drain_s
        return measurement

    def _simulate(self, requests: list[EngineRequest]) -> pl.DataFrame:
        arrival = np.array([r.arrival_s for r in requests], dtype=float)
        tokens = self._tokens[: arrival.size]
        spec = self.spec
        if spec.refuse or not (spec.slowdown == 0 and not spec.serial_prefill):
            ttft, e2e = serve_open(spec, arrival, tokens)
        else:
            pace = spec.open_loop_work  # the probe's levels are open loop
            first = pace * spec.prefill_s
            service = first + pace * tokens * spec.per_token_s
            wait = fcfs_waits(arrival, service, spec.slots)
            ttft, e2e = wait + first, wait + service
        records = simulated_records(arrival, ttft, e2e, np.full(arrival.size, spec.per_token_s))
        refused = pl.col("e2e_s").is_null()
        return records.with_columns(
            pl.when(refused).then(pl.col("sent_s")).otherwise(pl.col("end_s")).alias("end_s"),
            pl.when(refused).then(pl.lit("refused")).otherwise(pl.col("error_class"))
            .alias("error_class"),
        )  # fmt: skip


def measured(case: Case, *, seed: int, scale: float = 1.0) -> tuple[float | None, float]:
    """(today's search's limit, virtual seconds) on the case; `scale` < 1 shortens every
    level's rules by that factor (a user who shortens levels to save time)."""
    slo = parse_slo(case.slo)
    rules = SteadyRules()
    if scale != 1.0:
        rules = SteadyRules(
            min_warmup_s=rules.min_warmup_s * scale,
            warmup_e2es=rules.warmup_e2es * scale,
            min_window_s=max(rules.min_window_s * scale, 1.0),
            window_e2es=rules.window_e2es * scale,
            min_window_requests=max(1, round(rules.min_window_requests * scale)),
            max_level_s=rules.max_level_s * scale,
            effective_requests=rules.effective_requests * scale,
            tail_requests=rules.tail_requests * scale,
            warmup_taus=rules.warmup_taus * scale,
        )
    probe = _probe(case, seed=seed, rules=rules)
    start = round(0.5 * case.spec.capacity_rps, 2)
    config = SearchConfig(slo=slo, start=start, seed=seed, max_pooled_s=rules.max_level_s)
    return run_search(probe, config).feasible_max, probe.took_s


def _probe(case: Case, *, seed: int, rules: SteadyRules) -> SpecProbe:
    slo = parse_slo(case.slo)
    return SpecProbe(
        profile=preset_profile("chat"),
        config=build_engine_config("H100-80GB", "llama-3.1-8b"),  # unused: the server serves
        rules=rules,
        slo=slo,
        drain_s=(slo.longest_wait_s or 10.0) + 1.0,
        seed=seed,
        spec=case.spec,
    )


@dataclass(frozen=True)
class Default:
    """`capplan limit`'s default on a case: the fast search, then the measured levels that
    bracket its answer or take over from it (planner.limit.fast.result.seeded)."""

    limit: float | None
    fast: FastResult
    stopped: str  # the measured levels' (planner.limit.measured.search)
    levels: int  # measured levels after the fast search
    fast_s: float  # virtual seconds of load: the fast search
    measured_s: float  # and the measured levels after it
    held: bool  # the measured levels held the fast answer (no take-over)


def default(case: Case, *, seed: int) -> Default:
    """The default search on the case, as `capplan limit` runs it (planner.limit.run)."""
    result, fast_s = fast(case, seed=seed)
    rules = SteadyRules()
    config = SearchConfig(slo=parse_slo(case.slo), seed=seed, max_pooled_s=rules.max_level_s)
    config = seeded(config, result, echo=lambda _: None)
    probe = _probe(case, seed=seed, rules=rules)
    search = run_search(probe, config, on_level=None)
    answer = search.feasible_max
    if search.held_answer:
        answer = config.answered
    return Default(limit=answer, fast=result, stopped=search.stopped, levels=len(search.levels),
                   fast_s=fast_s, measured_s=probe.took_s, held=search.held_answer)  # fmt: skip


VARIANTS: dict[str, Callable[[FastConfig], FastConfig]] = {
    "fast": lambda c: c,
    "model only": lambda c: replace(c, confirm=False),
    "no warm start": lambda c: replace(c, warm=False),
    "no correction": lambda c: replace(c, correct=False),
    "measured sizes": lambda c: c,
}


def fast(case: Case, *, seed: int, variant: str = "fast") -> tuple[FastResult, float]:
    """The fast search on the case; "measured sizes": the model sizes requests by the answers
    the server returned, not by the sizes the driver draws (a load test's profile)."""
    config = VARIANTS[variant](FastConfig(parse_slo(case.slo), seed=seed))
    asked = None if variant == "measured sizes" else asked_of(case.spec, seed=seed)
    return run_fast(case.spec, config, seed=seed, characterise=case.characterise(), asked=asked)


@dataclass(frozen=True)
class Tally:
    """Ratios to the truth over seeds, with intervals and times."""

    ratios: tuple[float, ...]
    minutes: tuple[float, ...]
    covered: tuple[bool, ...] = ()
    fallbacks: int = 0

    def row(self) -> str:
        r = np.array(self.ratios)
        err = np.abs(r - 1)
        coverage = f"{np.mean(self.covered):.0%}" if self.covered else "-"
        return (
            f"{np.median(r):6.3f} {np.quantile(err, 0.95):6.1%} {np.mean(r > 1.05):6.0%} "
            f"{coverage:>5} {np.median(self.minutes):7.1f} {self.fallbacks:4d}"
        )


HEADER = f"{'median':>6} {'p95|e|':>6} {'>1.05':>6} {'cover':>5} {'min':>7} {'fall':>4}"


def fast_tally(case: Case, seeds: range, variant: str, truth_rps: float,
               echo: Callable[[str], None]) -> Tally:  # fmt: skip
    """The fast search over `seeds`; a run that says "model inadequate" falls back to the
    measured search (its time added)."""
    ratios, minutes, covered, fallbacks = [], [], [], 0
    for seed in seeds:
        result, took = fast(case, seed=seed, variant=variant)
        limit = result.limit
        if not result.adequate or limit is None:
            fallbacks += 1
            limit, extra = measured(case, seed=seed)
            took += extra
        ratios.append((limit or 0.0) / truth_rps)
        minutes.append(took / 60)
        if result.adequate and result.low is not None and result.high is not None:
            covered.append(result.low <= truth_rps <= result.high)
        interval = ""
        if result.low is not None and result.high is not None:
            interval = f" [{result.low:.4g}, {result.high:.4g}]"
        echo(f"  {case.name} {variant} seed {seed}: {limit:.4g} req/s{interval}, ratio "
             f"{ratios[-1]:.3f}, {took / 60:.1f} min, {result.stopped}")  # fmt: skip
    return Tally(tuple(ratios), tuple(minutes), tuple(covered), fallbacks)


def default_tally(case: Case, seeds: range, truth_rps: float,
                  echo: Callable[[str], None]) -> Tally:  # fmt: skip
    """`capplan limit`'s default over `seeds` (`default`); `fallbacks` counts the runs whose
    measured levels did not hold the fast answer (the measured search went on)."""
    ratios, minutes, took_over = [], [], 0
    for seed in seeds:
        run = default(case, seed=seed)
        took = run.fast_s + run.measured_s
        took_over += not run.held
        ratios.append((run.limit or 0.0) / truth_rps)
        minutes.append(took / 60)
        echo(f"  {case.name} default seed {seed}: {run.limit} req/s, ratio {ratios[-1]:.3f}, "
             f"{took / 60:.1f} min (fast {run.fast_s / 60:.1f}, {run.levels} measured levels "
             f"{run.measured_s / 60:.1f}): fast {run.fast.stopped}; {run.stopped}")  # fmt: skip
    return Tally(tuple(ratios), tuple(minutes), (), took_over)


def measured_tally(case: Case, seeds: range, truth_rps: float, echo: Callable[[str], None],
                   scale: float = 1.0) -> Tally:  # fmt: skip
    ratios, minutes = [], []
    for seed in seeds:
        limit, took = measured(case, seed=seed, scale=scale)
        ratios.append((limit or 0.0) / truth_rps)
        minutes.append(took / 60)
        echo(f"  {case.name} measured x{scale:g} seed {seed}: {limit} req/s, "
             f"ratio {ratios[-1]:.3f}, {took / 60:.1f} min")  # fmt: skip
    return Tally(tuple(ratios), tuple(minutes))


def grid_cases() -> list[Case]:
    """Slot counts x service-time spreads x SLO positions (TTFT threshold in mean services)."""
    cases = []
    for slots in (4, 16):
        for cv in (0.2, 1.0, 2.0):
            spec = ServerSpec(slots, 0.05, 0.01, (32, 96), tokens_cv=cv)
            mean_s = 0.05 + 64 * 0.01
            for position, times in (("tight", 0.5), ("loose", 2.0)):
                name = f"c{slots}-cv{cv:g}-{position}"
                cases.append(Case(name, spec, ttft_s=round(times * mean_s, 3)))
    return cases


def misspecified_cases() -> list[Case]:
    base = ServerSpec(8, 0.05, 0.01, (32, 96))
    return [
        Case("slowdown", replace(base, slowdown=0.04), ttft_s=0.7),
        Case(
            "prefill-contention", replace(base, prefill_s=0.15, serial_prefill=True), ttft_s=0.8
        ),  # fmt: skip
        Case("slots+25%", base, ttft_s=0.5, slots_error=1.25),
        Case("slots-25%", base, ttft_s=0.5, slots_error=0.75),
    ]


def truth_cases() -> list[Case]:
    return [
        Case("short", ServerSpec(8, 0.05, 0.01, (32, 96)), ttft_s=0.5),
        Case("refusing", ServerSpec(6, 0.06, 0.01, (70, 70), refuse=True), ttft_s=1.0),
        Case("long", ServerSpec(32, 0.2, 0.05, (160, 232)), ttft_s=2.0),
    ]
