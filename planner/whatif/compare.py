"""`capplan compare`: measured limit runs of several candidates, planned and ranked on one profile.

Each run directory holds a `capplan limit` result (limit.json). Every run is planned for the
profile's peak with the planner's arithmetic (`planner.capacity`): instances, GPUs, monthly
cost, and the cost of a million output tokens when an instance runs at its limit (the
profile's mean output length). Runs measured on another profile (digest) or under another
SLO are not comparable: refused unless forced, and then the table says so.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from contracts import __version__
from contracts.errors import ConfigError, InputError
from contracts.limit import LimitResult, load_limit, unconfirmed_reason
from contracts.plan import SloTerm
from contracts.whatif import COMPARE_SCHEMA, Compare, CompareRow
from planner.capacity.arithmetic import build_demand, demand_in_unit, plan_scenario
from planner.capacity.cost import gpu_hour_price, usd_per_million_output_tokens
from planner.engine.catalog import gpu_name
from planner.slo.recorded import limit_slo, normalise_slo
from profiles.model import Profile


class CompareOptions(BaseModel):
    """What `capplan compare` was asked: each option's bound and default declared once here
    (the CLI builds it with `capplan.cli.build_options`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    profile_path: str = Field(description="the profile the runs measured")
    runs: tuple[str, ...] = Field(description="run directories, each with a limit.json")
    labels: tuple[str, ...] = Field(default=(), description="one per run; default: the folder")
    gpus: tuple[str, ...] = Field(
        default=("H100-80GB",), description="one for all runs, or one per run"
    )
    tp: int = Field(default=1, ge=1, description="tensor-parallel GPUs per stage, every run")
    pp: int = Field(default=1, ge=1, description="pipeline stages: an instance holds tp x pp GPUs")
    gpu_hour_price_usd: float | None = Field(default=None, gt=0)
    peak_window: str = Field(default="60s", description="window of the peak's rate")
    peak_quantile: float = Field(default=0.99, gt=0, le=1, description="quantile of the windows")
    peak_rps: float | None = Field(default=None, gt=0, description="planning peak, req/s")
    growth: float = Field(default=1.0, gt=0, description="one growth factor")
    headroom: float = Field(default=0.2, ge=0, description="share above the peak")
    redundancy: int = Field(default=1, ge=0, description="spare instances (N+k)")
    force: bool = Field(default=False, description="compare mismatched runs, marked")

    @property
    def gpus_per_instance(self) -> int:
        """GPUs one instance holds: tp x pp (as `PlanOptions.gpus_per_instance`)."""
        return self.tp * self.pp


def _per_run(values: tuple[str, ...], n: int, option: str) -> list[str | None]:
    if not values:
        return [None] * n
    if len(values) == 1:
        return [values[0]] * n
    if len(values) != n:
        raise ConfigError(f"{option}: give one value or one per run ({n}), got {len(values)}")
    return list(values)


def mismatched_runs(
    profile: Profile, results: list[tuple[str, LimitResult]]
) -> list[tuple[str, str]]:
    """Why the runs are not comparable, as (run, why) for each run measured on another profile
    (digest) or under another SLO than the first."""
    digest = profile.digest()
    out = []
    slo0 = normalise_slo(results[0][1].slo)
    for run, r in results:
        if r.profile_digest and r.profile_digest != digest:
            why = (
                f"{run}: measured on profile {r.profile_digest[:12]}, not the given profile's "
                f"{digest[:12]} (a profile is its whole file: profiling the same log again "
                "writes another; give the file the run was measured with)"
            )
            out.append((run, why))
        if normalise_slo(r.slo) != slo0:
            out.append((run, f"{run}: SLO {r.slo!r} differs from {results[0][1].slo!r}"))
    return out


def compare_runs(profile: Profile, options: CompareOptions) -> Compare:
    """One row per run, ranked by monthly cost (then cost per million output tokens).

    Raises ConfigError for mismatched runs without `force`, or bad per-run options;
    InputError for a run without a readable limit.json.
    """
    if len(options.runs) < 1:
        raise ConfigError("give at least one run directory")
    results = [(run, load_limit(run)) for run in options.runs]
    odd = mismatched_runs(profile, results)
    problems = [why for _, why in odd]
    if problems and not options.force:
        raise ConfigError(
            "the runs are not comparable:\n  "
            + "\n  ".join(problems)
            + "\nmeasure them on the same profile and SLO, or pass --force to compare anyway"
        )
    labels = _per_run(options.labels, len(results), "--label")
    twice = sorted({x for x in labels if x and labels.count(x) > 1})
    if twice:
        raise ConfigError(f"--label: {', '.join(twice)} names more than one run; give each its own")
    gpus = _per_run(options.gpus, len(results), "--gpu")
    demand = build_demand(profile, options.peak_window, options.peak_quantile, options.peak_rps)
    pairs = profile.lengths.sampler.pairs
    mean_out = sum(o for _, o in pairs) / len(pairs) if pairs else None
    rows: list[CompareRow] = []
    for (run, r), label, gpu in zip(results, labels, gpus, strict=True):
        # the catalog's name, as whatif names its candidates; priced by it or as typed
        shown_gpu = gpu_name(gpu or "H100-80GB")
        price, _ = gpu_hour_price(shown_gpu, options.gpu_hour_price_usd)
        name = label or " ".join(x for x in (Path(run).name, r.model) if x)
        row = CompareRow(
            run=run, label=name, target=r.target, model=r.model, limit=r.feasible_max,
            unit=r.unit, binding=r.binding, recovery_s=r.recovery_s, recovered=r.recovered,
            instances=None, gpus=None, gpu=shown_gpu, monthly_cost_usd=None,
            usd_per_million_output_tokens=None, mean_output_tokens=mean_out, rank=None,
            predicted=r.predicted, mismatched=any(run == o for o, _ in odd),
        )  # fmt: skip
        if r.feasible_max:
            e2e = r.littles_law.mean_e2e_s if r.littles_law is not None else None
            peak = demand_in_unit(
                demand.model_copy(
                    update={"peak_concurrency": demand.peak_rps * e2e if e2e else None}
                ),
                r.unit,
            )
            s = plan_scenario(
                peak, r.unit, r.feasible_max, options.growth, options.headroom,
                options.redundancy, options.gpus_per_instance, price,
            )  # fmt: skip
            rate = r.feasible_max if r.unit == "rps" else (
                r.littles_law.rate_rps if r.littles_law is not None else None
            )  # fmt: skip
            row.instances, row.gpus, row.monthly_cost_usd = s.instances, s.gpus, s.monthly_cost_usd
            if rate and mean_out:
                row.usd_per_million_output_tokens = usd_per_million_output_tokens(
                    rate, mean_out, options.gpus_per_instance, price
                )
        rows.append(row)
    ranked = sorted(
        (x for x in rows if x.monthly_cost_usd is not None),
        key=lambda x: (x.monthly_cost_usd, x.usd_per_million_output_tokens or 0.0),
    )
    for i, x in enumerate(ranked, 1):
        x.rank = i
    # a search stopped before any load met the SLO found nothing yet; it did not find "none"
    stopped = [
        x.label
        for (_, r), x in zip(results, rows, strict=True)
        if r.feasible_max is None and unconfirmed_reason(r) is not None
    ]
    sentence = (
        f"{ranked[0].label} serves the peak of {demand.peak_rps:.3g} req/s cheapest: "
        f"{ranked[0].instances} instance(s), ${ranked[0].monthly_cost_usd:,.0f}/month"
        if ranked
        else "no run met the SLO at any load"
        if not stopped
        else f"no run has a limit yet: the search of {', '.join(stopped)} stopped before any "
        "load met the SLO (finish it with capplan limit --resume)"
    )
    if problems:
        sentence = "NOT COMPARABLE (--force): " + sentence
    return Compare(
        schema=COMPARE_SCHEMA,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        capplan_version=__version__,
        profile=options.profile_path,
        profile_digest=profile.digest(),
        slo=results[0][1].slo,
        slo_terms=_slo_terms(results[0][1]),
        peak_rps=demand.peak_rps,
        peak_definition=demand.peak_definition,
        growth=options.growth,
        headroom=options.headroom,
        redundancy=options.redundancy,
        forced=bool(problems),
        mismatches=problems,
        rows=rows,
        sentence=sentence,
    )


def _slo_terms(result: LimitResult) -> list[SloTerm]:
    """The terms of the SLO a run recorded, for words in the report; none when it no longer
    parses."""
    try:
        return limit_slo(result).terms()
    except (ConfigError, InputError):
        return []
