"""`capplan whatif`: which engine configuration serves a profile best, predicted in virtual time.

Candidates are GPUs x tensor-parallel degrees x the values of the varied knobs (a small
registry, `planner.whatif.knobs.KNOBS`). Each candidate's limit comes from the limit search
run against one engine-model instance in virtual time
(`planner.whatif.virtual.virtual_limit`); instances and cost from the planner's arithmetic
(`planner.capacity`). The lessons compare candidates that differ in one knob only and name
the figure that explains the difference.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from contracts import __version__
from contracts.errors import CannotServeError, ConfigError
from contracts.latency import quantile, request_values
from contracts.limit import LimitResult
from contracts.whatif import WHATIF_SCHEMA, NearFloor, Whatif, WhatifCandidate
from planner.capacity.arithmetic import build_demand, plan_scenario
from planner.capacity.cost import price_or_note, usd_per_million_output_tokens
from planner.capacity.floor import BelowFloorError, latency_floors
from planner.engine import EngineConfig, build_engine_config, kv_capacity_tokens
from planner.engine.catalog import find_model, gpu_name
from planner.engine.parallel import TP_LINKS, allreduce_latency_s
from planner.engine.precision import (
    precision_overrides,
)
from planner.fleet.executor import JobTasks, result_of
from planner.fleet.pool import parallel_workers
from planner.limit.measured.search import SearchResult
from planner.whatif.assumptions import assumptions, default_max_model_len, too_long_share
from planner.whatif.disagg import parse_disagg
from planner.whatif.interval import default_spread, limit_interval
from planner.whatif.knobs import KNOBS
from planner.whatif.options import WhatifOptions
from planner.whatif.routing import compare_routing
from planner.whatif.virtual import latency_split, virtual_limit
from profiles.model import Profile

# Fewer candidates run in this process: starting a worker costs about as much as one.
MIN_PARALLEL_CANDIDATES = 8


def tp_link_for(choice: str) -> str | None:
    """The link name forced by `--tp-link`, or None for `auto` (each board's own link)."""
    if choice == "auto":
        return None
    if choice not in TP_LINKS:
        raise ConfigError(f"--tp-link: unknown {choice!r}; known: auto, {', '.join(TP_LINKS)}")
    return choice


@dataclass(frozen=True)
class _Run:
    candidate: WhatifCandidate
    config: EngineConfig | None
    below_floor: bool = False  # the SLO is below what an idle instance of it achieves


def _candidate_config(
    options: WhatifOptions,
    gpu: str,
    tp: int,
    pp: int,
    settings: dict[str, str],
    max_len: int,
    factors: dict[str, Any],
) -> EngineConfig:
    overrides: dict[str, Any] = {
        "max_model_len": max_len,
        "engine": options.engine,
        "catalog": options.catalog,
        "pp": pp,
        **precision_overrides(options.quantization, options.kv_cache_dtype),
        **factors,
    }
    forced = tp_link_for(options.tp_link)
    if tp > 1 and forced is not None:
        link = TP_LINKS[forced]
        overrides["tp_link_bandwidth_bytes_per_s"] = link.bandwidth_bytes_per_s
        overrides["tp_allreduce_latency_s"] = allreduce_latency_s(link.hop_latency_s, tp)
    for name, value in settings.items():
        overrides.update(KNOBS[name].overrides(value))
    return build_engine_config(gpu, options.model, tp, **overrides)


def _label(gpu: str, tp: int, pp: int, settings: dict[str, str]) -> str:
    shape = f"{gpu} tp{tp}" + (f" pp{pp}" if pp > 1 else "")
    return " ".join([shape, *(f"{k}={v}" for k, v in settings.items())])


def judged_p95(records: pl.DataFrame, column: str) -> float | None:
    """P95 of the judged requests at the limit, as the verdicts count them
    (`contracts.latency.request_values`): a failed request +inf, one the level's drain cut
    short its age (a lower bound: it is not a request that never ends); TPOT over the
    requests that have one."""
    if records.height == 0:
        return None
    if column == "tpot_s":
        values = records[column].drop_nulls().drop_nans().to_numpy()
    else:
        values = request_values(records, column.removesuffix("_s"))
    return float(quantile(values, 0.95)) if len(values) else None


def _no_rate(search: SearchResult) -> str:
    """Why no rate met the SLO, with what the lowest load tried measured: the constraint
    furthest past its threshold there (a near-idle instance that misses it: latency, not
    load)."""
    text = f"no rate met the SLO ({search.stopped})"
    lowest = min(search.levels, key=lambda o: o.load, default=None)
    missed = [c for c in lowest.evaluation.constraints if not c.passed] if lowest else []
    known = [c for c in missed if c.value is not None]
    if lowest is None or not known:
        return text
    worst = min(known, key=lambda c: c.headroom)
    unit = " s" if worst.name.split(":")[0] in ("ttft", "tpot", "itl", "e2e") else ""
    return (
        f"{text}: even at {lowest.load:.3g} req/s {worst.name} was {worst.value:.3g}{unit} "
        f"against {worst.threshold:.3g}{unit}, so no load is light enough; see what sets it "
        "(long prompts, the GPU's prefill rate) before adding instances"
    )


def run_candidate(
    profile: Profile,
    options: WhatifOptions,
    shape: tuple[str, int, int],
    settings: dict[str, str],
    max_len: int,
    peak_rps: float,
    factors: dict[str, Any],
    start_rps: float | None = None,
) -> _Run:
    """One candidate (`shape`: GPU, tp, pp): its engine config, its virtual-time limit,
    instances and cost."""
    gpu, tp, pp = shape
    label = _label(gpu, tp, pp, settings)
    price, cost_note = price_or_note(gpu, options.gpu_hour_price_usd)
    disagg = parse_disagg(
        settings.get("disaggregation", "off"), options.kv_link_bandwidth_bytes_per_s
    )
    units = disagg.instances if disagg is not None else 1  # instances per planned unit
    try:
        config = _candidate_config(options, gpu, tp, pp, settings, max_len, factors)
    except ConfigError as err:
        why = err if isinstance(err, CannotServeError) else None
        short = why.short_bytes if why is not None else None
        return _Run(WhatifCandidate(label=label, gpu=gpu, tp=tp, pp=pp, settings=settings,
                                    problem=str(err), gpu_hour_price_usd=price,
                                    cannot_run=why.reason if why is not None else "other",
                                    short_gb_per_gpu=short / 1e9 if short is not None else None),
                    None)  # fmt: skip
    floors = [] if disagg is not None else latency_floors(config, profile, options.slo)
    below = [f for f in floors if f.binds]
    if below:  # no rate meets it: no search, no instance count
        problem = " ".join(f.sentence() for f in below)
        return _Run(WhatifCandidate(label=label, gpu=config.gpu.name, tp=tp, settings=settings,
                                    problem=problem, gpu_hour_price_usd=price), config,
                    below_floor=True)  # fmt: skip
    vl = virtual_limit(
        profile,
        config,
        options.slo,
        rules=options.rules(),
        level_s=options.fixed_level_s,
        start_rps=start_rps,
        tolerance=options.tolerance,
        seed=options.seed,
        disagg=disagg,
    )
    at = vl.at_limit
    split = latency_split(at, profile)
    limit = vl.limit_rps
    mean_e2e = float(at["e2e_s"].drop_nans().mean()) if at.height else None  # type: ignore[arg-type]
    mean_out = float(at["output_tokens"].mean()) if at.height else None  # type: ignore[arg-type]
    candidate = WhatifCandidate(
        label=label,
        gpu=config.gpu.name,
        tp=tp,
        pp=pp,
        settings=settings,
        problem=None if limit else _no_rate(vl.search),
        limit_rps=limit,
        infeasible_rps=vl.search.infeasible_min,
        binding=vl.search.binding,
        stopped=vl.search.stopped,
        levels=len(vl.search.levels),
        ttft_p95_s=judged_p95(at, "ttft_s"),
        tpot_p95_s=judged_p95(at, "tpot_s"),
        e2e_p95_s=judged_p95(at, "e2e_s"),
        mean_e2e_s=mean_e2e,
        concurrency_at_limit=limit * mean_e2e if limit and mean_e2e else None,
        short_ttft_p99_s=split.short_ttft_p99_s,
        long_ttft_p99_s=split.long_ttft_p99_s,
        mean_output_tokens=mean_out,
        output_tokens_per_s=limit * mean_out if limit and mean_out else None,
        kv_capacity_tokens=kv_capacity_tokens(config),
        shared_prompt_share=vl.shared_prompt_share,
        gpu_hour_price_usd=price,
        cost_note=cost_note if limit else None,  # said where a limit stands uncosted
        simulated_requests=vl.simulated_requests,
        wall_s=vl.wall_s,
    )
    if limit:
        near = [f for f in floors if f.near]
        candidate.limit_note = " ".join(f.near_sentence(limit) for f in near) or None
        candidate.near_floors = [
            NearFloor(constraint=f.constraint, threshold_s=f.threshold_s, floor_s=f.floor_s,
                      prompt_tokens=f.prompt_tokens)
            for f in near
        ]  # fmt: skip
        interval = limit_interval(
            limit, settings.get("engine", options.engine), config.gpu.name, default_spread()
        )
        candidate.limit_low_rps = interval.low_rps
        candidate.limit_high_rps = interval.high_rps
        candidate.limit_interval_basis = interval.note
        candidate.limit_interval_source = interval.source
        # A disaggregated candidate is planned in units of p + d instances (tp GPUs each).
        scenario = plan_scenario(
            peak_rps, "rps", limit, options.growth, options.headroom, options.redundancy,
            tp * pp * units, price,
        )  # fmt: skip
        candidate.instances = scenario.instances * units
        candidate.gpus = scenario.gpus
        if cost_note is None:
            candidate.monthly_cost_usd = scenario.monthly_cost_usd
        if mean_out and cost_note is None:
            candidate.usd_per_million_output_tokens = usd_per_million_output_tokens(
                limit, mean_out, tp * pp * units, price
            )
    return _Run(candidate, config)


@dataclass(frozen=True)
class _GridJob:
    """What every candidate of one grid shares (handed to each worker once)."""

    profile: Profile
    options: WhatifOptions
    max_len: int
    peak_rps: float
    factors: dict[str, Any]


def _grid_candidate(
    job: _GridJob, shape: tuple[str, int, int], settings: dict[str, str], start: float | None
) -> _Run:
    return run_candidate(
        job.profile, job.options, shape, settings, job.max_len, job.peak_rps, job.factors,
        start_rps=start,
    )  # fmt: skip


def run_grid(
    job: _GridJob,
    shapes: list[tuple[str, int, int]],
    names: list[str],
    combos: list[tuple[str, ...]],
    progress: Callable[[str], None] | None = None,
) -> list[_Run]:
    """Every candidate (shape x combo), in that order, on the options' executor.

    Each candidate's search is its own: it starts from its own engine's roofline (not from
    another candidate's limit), so a candidate's limit does not depend on which others the
    grid holds nor on the order the knobs' values were listed in (a search started at a
    companion's limit found another boundary where pass and fail are not monotone in the
    rate: a 1p3d disaggregated unit gave 0.618 req/s beside 1p1d and 0.94 beside off). Each
    result is a seeded search whatever the executor, so local, process and Dask runs are the
    same. Progress lines come as candidates finish, in candidate order within a shape; the
    runs come back in candidate order.
    """
    total = len(shapes) * len(combos)
    workers = parallel_workers(total >= MIN_PARALLEL_CANDIDATES)
    runs: list[_Run] = []
    with JobTasks(job.options.executor, job, workers) as tasks:
        futures = [
            [
                tasks.submit(_grid_candidate, shape, dict(zip(names, combo, strict=True)), None)
                for combo in combos
            ]
            for shape in shapes
        ]
        for row in futures:
            for future in row:
                got = result_of(future)
                _report(got.candidate, progress)
                runs.append(got)
    return runs


def _report(c: WhatifCandidate, progress: Callable[[str], None] | None) -> None:
    if progress:
        got = f"{c.limit_rps:.3g} req/s" if c.limit_rps else (c.problem or "-")
        progress(f"{c.label}: {got} ({c.levels} levels, {c.wall_s:.1f} s)")


def check_servable(
    options: WhatifOptions,
    names: list[str],
    combos: list[tuple[str, ...]],
    max_len: int,
    factors: dict[str, Any],
) -> None:
    """ConfigError (exit 2) when no candidate can be served at all (a quantization no GPU
    asked for can run, a model that fits none of them), with each distinct reason; a grid
    where only some candidates fail shows those as rows with their problem instead."""
    problems: list[str] = []
    for gpu, tp, pp in itertools.product(options.gpus, options.tps, options.pps):
        for combo in combos:
            settings = dict(zip(names, combo, strict=True))
            try:
                _candidate_config(options, gpu, tp, pp, settings, max_len, factors)
            except ConfigError as err:
                problems.append(str(err))
                continue
            return
    raise ConfigError("no candidate can be served: " + "; ".join(dict.fromkeys(problems)))


def pareto_front(candidates: list[WhatifCandidate]) -> list[WhatifCandidate]:
    """Candidates no other beats on both monthly cost and p95 e2e at the limit."""
    ok = [c for c in candidates if c.monthly_cost_usd is not None and c.e2e_p95_s is not None]
    front = []
    for c in ok:
        cost, lat = c.monthly_cost_usd, c.e2e_p95_s
        assert cost is not None and lat is not None
        dominated = any(
            o is not c
            and o.monthly_cost_usd is not None
            and o.e2e_p95_s is not None
            and o.monthly_cost_usd <= cost
            and o.e2e_p95_s <= lat
            and (o.monthly_cost_usd < cost or o.e2e_p95_s < lat)
            for o in ok
        )
        if not dominated:
            front.append(c)
    return sorted(front, key=lambda c: c.monthly_cost_usd or 0.0)


def rank(candidates: list[WhatifCandidate]) -> None:
    """Rank by monthly cost (cheapest first; 1-based); at the same cost, the higher limit first
    (more headroom for the same money: the lower cost per million output tokens), then the
    lower p95 e2e. Each candidate's e2e is taken at its own limit, so it is not compared
    before the limits are."""
    ok = [c for c in candidates if c.monthly_cost_usd is not None]
    ok.sort(key=lambda c: (c.monthly_cost_usd, -(c.limit_rps or 0), c.e2e_p95_s or math.inf))
    for i, c in enumerate(ok, 1):
        c.rank = i


def run_whatif(
    profile: Profile,
    options: WhatifOptions,
    *,
    calibration: LimitResult | None = None,
    progress: Callable[[str], None] | None = None,
) -> Whatif:
    """Every candidate's predicted limit, instances and cost, the Pareto front and the lessons.

    With `calibration` (a measured limit.json of the first GPU's baseline configuration), the
    engine's efficiency factors are first fitted to it (`planner.fleet.calibration.calibrate`, as
    `capplan plan` does) and used for every candidate. Raises ConfigError for bad options.
    """
    from planner.whatif.lessons import lessons_for

    wall0 = time.perf_counter()
    if not options.gpus or not options.tps or not options.pps:
        raise ConfigError("give at least one --gpu, one --tp and one --pp")
    # Each GPU by its catalog name, once (an unknown one as given: its candidate says why).
    gpus = tuple(dict.fromkeys(gpu_name(g, options.catalog) for g in options.gpus))
    options = options.model_copy(update={"gpus": gpus})
    slo = options.slo
    demand = build_demand(profile, options.peak_window, options.peak_quantile, options.peak_rps)
    # The model's context from the catalog: no GPU or tp to fit it on yet (a 70B model does
    # not fit one H100, and the candidates may all be tp > 1).
    model_ctx = find_model(options.model, options.catalog).max_context_tokens
    if options.max_model_len is not None and options.max_model_len > model_ctx:
        raise ConfigError(
            f"--max-model-len {options.max_model_len:,} exceeds {options.model}'s context of "
            f"{model_ctx:,} tokens (vLLM refuses to start with it)"
        )
    max_len = options.max_model_len or default_max_model_len(profile, model_ctx)
    factors: dict[str, Any] = dict(options.engine_overrides)
    cal_dict: dict[str, float] | None = None
    cal_note = factors.get("calibration_source")
    if calibration is not None:
        from planner.fleet.calibration import calibrate

        base = build_engine_config(
            options.gpus[0], options.model, options.tps[0], options.catalog,
            pp=options.pps[0],
            **precision_overrides(options.quantization, options.kv_cache_dtype),
            **factors,
        )  # fmt: skip
        if progress:
            progress(f"calibrating the engine model to {calibration.target or 'the limit.json'}")
        fitted, cal = calibrate(profile, base, calibration, rng_seed=options.seed)
        factors.update(mfu=fitted.mfu, mbu=fitted.mbu, step_overhead_s=fitted.step_overhead_s)
        cal_dict = cal.as_dict()
        cal_note = (
            f"calibrated to {cal.levels} measured levels on {base.gpu.name}: mfu {cal.mfu:.3g}, "
            f"mbu {cal.mbu:.3g}, step overhead {cal.step_overhead_s * 1e3:.3g} ms; mean relative "
            f"error {cal.mean_rel_error:.1%} (uncalibrated {cal.default_mean_rel_error:.1%}); "
            f"the same utilisation factors are assumed on the other GPUs"
        )
    names = list(options.vary)
    combos = list(itertools.product(*(options.vary[n] for n in names))) or [()]
    check_servable(options, names, combos, max_len, factors)
    job = _GridJob(profile, options, max_len, demand.peak_rps, factors)
    shapes = list(itertools.product(options.gpus, options.tps, options.pps))
    runs = run_grid(job, shapes, names, combos, progress)
    if calibration is not None:
        for run in runs:
            run.candidate.calibration_error = cal_dict["mean_rel_error"] if cal_dict else None
    if all(r.below_floor for r in runs):
        raise BelowFloorError(" ".join(dict.fromkeys(r.candidate.problem or "" for r in runs)))
    candidates = [r.candidate for r in runs]
    rank(candidates)
    front = pareto_front(candidates)
    for c in front:
        c.pareto = True
    configs = {r.candidate.label: r.config for r in runs if r.config is not None}
    lessons = lessons_for(profile, options, candidates, configs, max_len)
    compared = compare_routing(profile, options, candidates, configs, demand, progress)
    return Whatif(
        schema=WHATIF_SCHEMA,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        capplan_version=__version__,
        profile=options.profile_path,
        profile_digest=profile.digest(),
        slo=slo.text,
        slo_terms=slo.terms(),
        model=options.model,
        quantization=options.quantization,
        kv_cache_dtype=options.kv_cache_dtype,
        peak_rps=demand.peak_rps,
        peak_definition=demand.peak_definition,
        growth=options.growth,
        headroom=options.headroom,
        redundancy=options.redundancy,
        level_s=options.level_s,
        calibration=cal_dict,
        calibration_note=cal_note,
        candidates=candidates,
        pareto=[c.label for c in front],
        lessons=lessons,
        assumptions=assumptions(options, max_len, too_long_share(profile, max_len)),
        simulated_requests=sum(c.simulated_requests for c in candidates),
        wall_s=time.perf_counter() - wall0,
        routing_candidate=compared[0] if compared else None,
        routing=compared[1] if compared else None,
    )
