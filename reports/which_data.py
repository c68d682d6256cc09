"""What the report's "Which configuration" section shows, read from whatif.json or compare.json.

Every limit, count and cost is the one `capplan whatif` or `capplan compare` stored. The only
numbers made here are the ratios the lessons state: how much less the cheapest fleet costs
than each other GPU's (whatif) or each other run's (compare) cheapest fleet, from the two
stored monthly costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contracts.jsonio import read_json, validate
from contracts.limit import IntervalSource
from contracts.plan import SloTerm
from contracts.whatif import (
    COMPARE_SCHEMA,
    WHATIF_SCHEMA,
    Compare,
    CompareRow,
    Lesson,
    NearFloor,
    Whatif,
    WhatifCandidate,
)

WhichKind = Literal["whatif", "compare"]


@dataclass(frozen=True)
class WhichRow:
    """One candidate of the ranked table: a predicted (whatif) or measured (compare) limit."""

    label: str
    gpu: str
    limit: float | None
    unit: str  # "rps" or "users"
    binding: str | None
    instances: int | None
    gpus: int | None
    monthly_cost_usd: float | None
    usd_per_million_output_tokens: float | None
    rank: int | None
    calibration_error: float | None  # whatif, when calibrated on a measured limit
    pareto: bool | None  # whatif: on the cost / p95 e2e front; None for compare
    problem: str | None  # whatif: why there is no prediction
    # a predicted limit's interval (the validation's spread for its engine and GPU class,
    # computed by planner.whatif.interval and stored in whatif.json, or in compare.json for a
    # run whose limit is the engine model's); None for a measured limit
    limit_low: float | None = None
    limit_high: float | None = None
    limit_source: IntervalSource | None = None  # where the interval comes from
    # whatif: the SLO constraint an idle instance nearly uses up (latency sets the limit)
    near_floor: NearFloor | None = None
    # whatif: a limit with no cost (no public price on file for its GPU)
    no_price: bool = False
    # compare: measured on another profile or SLO than the first run (--force)
    mismatched: bool = False
    # whatif: why the candidate cannot run at all (`cannot_run`), or None
    cannot: CannotRun | None = None


@dataclass(frozen=True)
class CannotRun:
    """Why a whatif candidate has no engine at all: its model does not fit (`short_gb` per
    GPU), its board lacks FP4 tensor cores, its tp does not split the heads, or another
    configuration error (`other`)."""

    kind: Literal["fit", "fp4", "heads", "other"]
    short_gb: float | None = None


def cannot_run(c: WhatifCandidate) -> CannotRun | None:
    """Why a whatif candidate has no engine at all (its `cannot_run` and `short_gb_per_gpu`,
    set where its configuration failed: planner.whatif.run), or None when it ran."""
    if c.cannot_run is None:
        return None
    return CannotRun(c.cannot_run, c.short_gb_per_gpu if c.cannot_run == "fit" else None)


@dataclass(frozen=True, kw_only=True)
class CostGap:
    """The cheapest fleet against another one that serves the same peak at the same SLO."""

    cheaper: WhichRow
    dearer: WhichRow
    saving_frac: float  # 1 - cheaper / dearer monthly cost


@dataclass(frozen=True)
class WhichSection:
    """One whatif.json or compare.json, ready to render."""

    kind: WhichKind
    path: Path
    profile: str
    slo: str
    slo_terms: list[SloTerm]
    model: str
    peak_rps: float
    peak_definition: str
    rows: list[WhichRow]  # ranked ones by rank, then the candidates without a rank
    cost_gaps: list[CostGap]
    cheapest_per_token: WhichRow | None  # when it is not the cheapest fleet
    knob_lessons: list[Lesson]  # whatif: one method against its baseline, from whatif.json
    # whatif: where an engine leads the next by more than the ranking margin ("engine ranking")
    engine_rankings: list[Lesson]
    forced: bool  # compare: mismatched runs compared with --force
    mismatches: list[str]
    calibration_note: str | None


def _ranked(rows: list[WhichRow]) -> list[WhichRow]:
    return sorted(rows, key=lambda r: (r.rank is None, r.rank or 0))


def cost_gaps(rows: list[WhichRow], group_by_gpu: bool) -> list[CostGap]:
    """The cheapest fleet against the cheapest of every other group (GPU, or each row)."""
    costed = [r for r in _ranked(rows) if r.monthly_cost_usd and r.rank is not None]
    if not costed:
        return []
    best, seen, out = costed[0], {costed[0].gpu if group_by_gpu else costed[0].label}, []
    for r in costed[1:]:
        key = r.gpu if group_by_gpu else r.label
        if key in seen:
            continue
        seen.add(key)
        assert best.monthly_cost_usd is not None and r.monthly_cost_usd is not None
        out.append(
            CostGap(
                cheaper=best, dearer=r, saving_frac=1.0 - best.monthly_cost_usd / r.monthly_cost_usd
            )
        )
    return out


def cheapest_per_token(rows: list[WhichRow]) -> WhichRow | None:
    """The row with the lowest cost per million output tokens, when it is not ranked first
    and the first costs less a month (at the same cost there is nothing to explain)."""
    priced = [r for r in rows if r.usd_per_million_output_tokens is not None]
    if not priced:
        return None
    low = min(priced, key=lambda r: r.usd_per_million_output_tokens or 0.0)
    best = next((r for r in rows if r.rank == 1), None)
    if low.rank == 1 or best is None or best.monthly_cost_usd is None:
        return None
    if low.monthly_cost_usd is not None and low.monthly_cost_usd <= best.monthly_cost_usd:
        return None
    return low


def _whatif_row(c: WhatifCandidate) -> WhichRow:
    return WhichRow(
        label=c.label,
        gpu=c.gpu,
        limit=c.limit_rps,
        unit="rps",
        binding=c.binding,
        instances=c.instances,
        gpus=c.gpus,
        monthly_cost_usd=c.monthly_cost_usd,
        usd_per_million_output_tokens=c.usd_per_million_output_tokens,
        rank=c.rank,
        calibration_error=c.calibration_error,
        pareto=c.pareto,
        problem=c.problem,
        limit_low=c.limit_low_rps,
        limit_high=c.limit_high_rps,
        limit_source=c.limit_interval_source,
        near_floor=max(c.near_floors, key=lambda f: f.floor_s / f.threshold_s, default=None),
        no_price=c.cost_note is not None,
        cannot=cannot_run(c),
    )


def _compare_row(r: CompareRow) -> WhichRow:
    return WhichRow(
        label=r.label,
        gpu=r.gpu,
        limit=r.limit,
        unit=r.unit,
        binding=r.binding,
        instances=r.instances,
        gpus=r.gpus,
        monthly_cost_usd=r.monthly_cost_usd,
        usd_per_million_output_tokens=r.usd_per_million_output_tokens,
        rank=r.rank,
        calibration_error=None,
        pareto=None,
        problem=None,
        limit_low=r.predicted.low if r.predicted is not None else None,
        limit_high=r.predicted.high if r.predicted is not None else None,
        limit_source=r.predicted.source if r.predicted is not None else None,
        mismatched=r.mismatched,
    )


def whatif_section(data: Whatif, path: Path) -> WhichSection:
    """The section of a whatif result: candidates by rank, GPUs against the cheapest fleet."""
    rows = _ranked([_whatif_row(c) for c in data.candidates])
    return WhichSection(
        kind="whatif",
        path=path,
        profile=data.profile,
        slo=data.slo,
        slo_terms=list(data.slo_terms),
        model=data.model,
        peak_rps=data.peak_rps,
        peak_definition=data.peak_definition,
        rows=rows,
        cost_gaps=cost_gaps(rows, group_by_gpu=True),
        cheapest_per_token=cheapest_per_token(rows),
        knob_lessons=[x for x in data.lessons if x.knob not in ("gpu", "engine ranking")],
        engine_rankings=[x for x in data.lessons if x.knob == "engine ranking"],
        forced=False,
        mismatches=[],
        calibration_note=data.calibration_note,
    )


def compare_section(data: Compare, path: Path) -> WhichSection:
    """The section of a compare result: runs by rank, each against the cheapest."""
    rows = _ranked([_compare_row(r) for r in data.rows])
    models = sorted({r.model for r in data.rows if r.model})
    return WhichSection(
        kind="compare",
        path=path,
        profile=data.profile,
        slo=data.slo,
        slo_terms=list(data.slo_terms),
        model=", ".join(models),
        peak_rps=data.peak_rps,
        peak_definition=data.peak_definition,
        rows=rows,
        cost_gaps=cost_gaps(rows, group_by_gpu=False),
        cheapest_per_token=cheapest_per_token(rows),
        knob_lessons=[],
        engine_rankings=[],
        forced=data.forced,
        mismatches=list(data.mismatches),
        calibration_note=None,
    )


def load_whatif(path: Path) -> WhichSection:
    """Read whatif.json; raises InputError naming the file and the first bad field."""
    return whatif_section(validate(Whatif, read_json(path, "whatif"), path, WHATIF_SCHEMA), path)


def load_compare(path: Path) -> WhichSection:
    """Read compare.json; raises InputError naming the file and the first bad field."""
    data = validate(Compare, read_json(path, "compare"), path, COMPARE_SCHEMA)
    return compare_section(data, path)


def load_sections(whatif: Path | None = None, compare: Path | None = None) -> list[WhichSection]:
    """The sections asked for, whatif first; raises InputError on a missing or bad file."""
    out = []
    if whatif is not None:
        out.append(load_whatif(whatif))
    if compare is not None:
        out.append(load_compare(compare))
    return out
