"""The "Which configuration" section: candidates ranked by the monthly cost of the fleet for the
peak, a cost bar chart, and the lessons for this workload in sentences a manager reads.

It reads only `reports.which_data.WhichSection` (whatif.json or compare.json) and the layout
toolkit, so it ends a capacity baseline or stands alone in its own document.
"""

from __future__ import annotations

from collections.abc import Sequence

from reportlab.platypus import CondPageBreak, Flowable, PageBreak, Paragraph, Spacer

from contracts.whatif import CLEAR_CHANGE
from reports.charts_which import Bar, cost_bars
from reports.i18n.findings import lesson_figure
from reports.i18n.predicted_words import interval_source
from reports.i18n.slo_words import slo_stated
from reports.i18n.which import KNOB_NAMES
from reports.layout import CONTENT_W, Layout, markup
from reports.which_data import CostGap, WhichRow, WhichSection

MAX_BARS = 16  # more candidates than this: the chart shows the cheapest, the table all


def _knob(layout: Layout, name: str) -> str:
    return KNOB_NAMES[layout.words.lang].get(name, name)


def ranked_table(layout: Layout, section: WhichSection) -> Flowable:
    """Rank, candidate, limit, binding, instances, GPUs, costs; whatif gives each predicted
    limit's interval and adds the calibration error (when calibrated) and the Pareto mark."""
    w = layout.words
    whatif = section.kind == "whatif"
    calibrated = any(r.calibration_error is not None for r in section.rows)
    cols: list[tuple[str, float]] = [
        ("which_col_rank", 0.07),
        ("which_col_candidate", 0.165 if whatif and calibrated else 0.275),
        ("which_col_limit_predicted", 0.14) if whatif else ("which_col_limit", 0.1),
        ("which_col_binding", 0.1),
        ("which_col_instances", 0.095),
        ("which_col_gpus", 0.06),
        ("which_col_cost", 0.09),
        ("which_col_token_cost", 0.12),
    ]
    if whatif and calibrated:
        cols.append(("which_col_calibration", 0.11))
    if whatif:
        cols.append(("which_col_pareto", 0.07))
    rows: list[list[str]] = [[layout.t(key) for key, _ in cols]]
    for r in section.rows:
        row = [
            str(r.rank) if r.rank is not None else "–",
            r.label,
            _limit_cell(layout, r),
            r.binding or ("–" if r.limit else _no_limit_cell(layout, r)),
            w.integer(r.instances),
            w.integer(r.gpus),
            w.usd(r.monthly_cost_usd),
            w.usd(r.usd_per_million_output_tokens),
        ]
        if whatif and calibrated:
            row.append(w.pct(r.calibration_error))
        if whatif:
            row.append(layout.t("which_pareto_mark") if r.pareto else "")
        rows.append(row)
    total = sum(f for _, f in cols)
    best = [(i, c) for i, r in enumerate(section.rows, 1) if r.rank == 1 for c in (0, 6)]
    return layout.table(rows, [CONTENT_W * f / total for _, f in cols], highlight=best)


def _no_limit_cell(layout: Layout, row: WhichRow) -> str:
    """Why a row has no limit: it cannot run (and why), or no load meets the SLO."""
    if row.cannot is not None:
        return layout.t(f"which_cannot_{row.cannot.kind}")
    return layout.t("which_no_limit")


def _limit_cell(layout: Layout, row: WhichRow) -> str | Flowable:
    """The limit, and for a predicted one, on a line of its own (a Chinese line may break
    anywhere, inside a number too), the interval a GPU's limit is expected in."""
    w = layout.words
    if row.limit is None or row.limit_low is None or row.limit_high is None:
        return w.load(row.limit, row.unit)
    style = layout.styles.cell
    font = style.fontName
    interval = f"({w.num(row.limit_low)}–{w.num(row.limit_high)})"
    return Paragraph(
        f"{markup(w.load(row.limit, row.unit), font)}<br/>{markup(interval, font)}", style
    )


def cost_chart(layout: Layout, section: WhichSection) -> list[Flowable]:
    """The bar chart of the ranked candidates' monthly cost (the cheapest MAX_BARS)."""
    costed = [r for r in section.rows if r.monthly_cost_usd is not None]
    if not costed:
        return []
    shown = costed[:MAX_BARS]
    whatif = section.kind == "whatif"
    bars = [
        Bar(r.label, r.monthly_cost_usd or 0.0, bool(r.pareto) if whatif else r.rank == 1)
        for r in shown
    ]
    out: list[Flowable] = [
        cost_bars(
            bars,
            CONTENT_W,
            font=layout.words.font,
            title=layout.t("which_chart"),
            axis_label=layout.t("which_chart_axis"),
            value_text=[layout.words.usd(r.monthly_cost_usd) for r in shown],
            marked_label=layout.t("which_chart_pareto" if whatif else "which_chart_best"),
        )
    ]
    if len(costed) > len(shown):
        out.append(layout.para(layout.t("which_chart_more", shown=len(shown), total=len(costed))))
    return out


def _compare_predicted(layout: Layout, row: WhichRow) -> str:
    """A compared run whose limit is the engine model's: predicted, not measured, and where."""
    w = layout.words
    return layout.t(
        "which_compare_predicted",
        label=row.label,
        limit=w.load(row.limit, row.unit),
        low=w.load(row.limit_low, row.unit),
        high=w.load(row.limit_high, row.unit),
        source=interval_source(layout.t, row.limit_source) if row.limit_source else layout.t("na"),
    )


def _gap_sentence(layout: Layout, section: WhichSection, gap: CostGap) -> str:
    w = layout.words
    by_gpu = section.kind == "whatif"
    key = "which_gap_gpu" if by_gpu else "which_gap_run"
    if gap.cheaper.mismatched or gap.dearer.mismatched:  # not measured alike: not "the same SLO"
        key = "which_gap_run_forced"
    if gap.cheaper.monthly_cost_usd == gap.dearer.monthly_cost_usd:  # "0 % less" is a tie
        key = "which_gap_tie"
    return layout.t(
        key,
        cheaper=gap.cheaper.gpu if by_gpu else gap.cheaper.label,
        dearer=gap.dearer.gpu if by_gpu else gap.dearer.label,
        pct=w.pct(gap.saving_frac, 0),
        n1=gap.cheaper.instances,
        n2=gap.dearer.instances,
        cost1=w.usd(gap.cheaper.monthly_cost_usd),
        cost2=w.usd(gap.dearer.monthly_cost_usd),
    )


def lesson_sentences(layout: Layout, section: WhichSection) -> list[str]:
    """The section's lessons: the cheapest fleet, what it saves against the others, the cost per
    token when it ranks otherwise, the candidates without a limit, and (whatif) each method
    against its baseline with the figure that explains it. A predicted limit (whatif's best,
    a compared run whose limit is the engine model's) says so, with its interval."""
    w = layout.words
    out: list[str] = []
    best = next((r for r in section.rows if r.rank == 1), None)
    if best is not None:
        out.append(
            layout.t(
                "which_best",
                label=best.label,
                peak=w.rate(section.peak_rps),
                n=best.instances,
                gpus=best.gpus,
                cost=w.usd(best.monthly_cost_usd),
            )
        )
    # the first page's prediction: the cheapest, else (none priced) the first with a limit
    lead = best or next((r for r in section.rows if r.no_price), None)
    if lead is not None and section.kind == "whatif" and lead.limit_low is not None:
        out.append(
            layout.t(
                "which_predicted",
                label=lead.label,
                limit=w.load(lead.limit, lead.unit),
                low=w.load(lead.limit_low, lead.unit),
                high=w.load(lead.limit_high, lead.unit),
                # a whatif.json written before the source was stored: the sentence stays
                source=interval_source(layout.t, lead.limit_source)
                if lead.limit_source is not None
                else layout.t("na"),
            )
        )
    unpriced = [r.label for r in section.rows if r.no_price]
    if unpriced:
        out.append(layout.t("which_no_price", labels=", ".join(unpriced)))
    if best is not None and best.near_floor is not None:
        f = best.near_floor
        out.append(
            layout.t(
                "which_near_floor",
                label=best.label,
                constraint=f.constraint,
                floor=w.seconds(f.floor_s),
                threshold=w.seconds(f.threshold_s),
                share=w.pct(f.floor_s / f.threshold_s, 0),
                tokens=w.num(f.prompt_tokens),
            )
        )
    if section.kind == "compare":
        out += [_compare_predicted(layout, r) for r in section.rows if r.limit_low is not None]
    out += [_gap_sentence(layout, section, gap) for gap in section.cost_gaps]
    low = section.cheapest_per_token
    if low is not None and best is not None:
        out.append(
            layout.t(
                "which_per_token",
                label=low.label,
                usd=w.usd(low.usd_per_million_output_tokens),
                best=best.label,
                best_usd=w.usd(best.usd_per_million_output_tokens),
            )
        )
    unmet = [r.label for r in section.rows if not r.limit and r.cannot is None]
    if unmet:
        out.append(layout.t("which_no_limit_lesson", labels=", ".join(unmet)))
    cannot = [(r, r.cannot) for r in section.rows if not r.limit and r.cannot is not None]
    for r, why in cannot:  # each its own shortfall
        if why.kind == "fit":
            out.append(layout.t("which_cannot_fit_lesson", labels=r.label, gb=w.num(why.short_gb)))
    for kind in ("fp4", "heads", "other"):
        labels = ", ".join(r.label for r, why in cannot if why.kind == kind)
        if labels:
            out.append(layout.t(f"which_cannot_{kind}_lesson", labels=labels))
    for lesson in section.engine_rankings:  # "on H100-80GB tp2, trtllm ranks first: ..."
        if lesson.where is not None:
            out.append(
                layout.t("which_engine_ranking", where=lesson.where, winner=lesson.alternative)
            )
    for lesson in section.knob_lessons:
        names = {
            "knob": _knob(layout, lesson.knob),
            "baseline": _knob(layout, lesson.baseline),
            "alternative": _knob(layout, lesson.alternative),
        }
        change = lesson.limit_change
        if change is None:
            out.append(layout.t("which_no_prediction", **names))
            continue
        verdict = (
            "which_pays"
            if change >= CLEAR_CHANGE
            else "which_hurts"
            if change <= -CLEAR_CHANGE
            else ""
        )
        sentence = layout.t("which_knob", change=f"{change * 100:+.0f} %", **names)
        out.append(
            sentence
            + layout.t(verdict or "which_even")
            + " "
            + layout.t("which_why", figure=lesson_figure(layout.words, lesson))
        )
    return out


def section_flowables(layout: Layout, section: WhichSection) -> list[Flowable]:
    """One whatif or compare result: where it comes from, the table, the chart, the lessons."""
    styles, w = layout.styles, layout.words
    whatif = section.kind == "whatif"
    peak = w.rate(section.peak_rps)
    if w.lang == "en":  # the peak's definition is the planner's English text
        peak += f" ({section.peak_definition})"
    out: list[Flowable] = [
        CondPageBreak(160),
        layout.para(
            layout.t("which_whatif_heading" if whatif else "which_compare_heading"), styles.h2
        ),
        layout.para(
            layout.t("which_whatif_source" if whatif else "which_compare_source", path=section.path)
        ),
        layout.para(
            layout.t(
                "which_context",
                profile=section.profile,
                slo=slo_stated(layout.words, section.slo, section.slo_terms),
                model=section.model or "–",
                peak=peak,
            )
        ),
    ]
    if section.forced:
        out.append(layout.para(layout.t("which_not_comparable"), styles.warning))
        out += [layout.para(m, styles.mono) for m in section.mismatches]
    heading = "which_table_heading_forced" if section.forced else "which_table_heading"
    out += [
        layout.para(layout.t(heading), styles.warning if section.forced else styles.h2),
        ranked_table(layout, section),
        Spacer(1, 8),
    ]
    out += cost_chart(layout, section)
    out += [CondPageBreak(90), layout.para(layout.t("which_lessons_heading"), styles.h2)]
    out += [layout.para(f"– {s}") for s in lesson_sentences(layout, section)]
    if section.calibration_note is not None:
        out.append(layout.para(layout.t("which_calibrated", note=section.calibration_note)))
    return out


def page_which(
    layout: Layout, sections: Sequence[WhichSection], *, standalone: bool = False
) -> list[Flowable]:
    """The section's flowables (none without sections): on a new page under its heading, or,
    `standalone`, as the body of its own document (whose title names it)."""
    if not sections:
        return []
    out: list[Flowable] = []
    if not standalone:
        out += [PageBreak(), layout.para(layout.t("which_heading"), layout.styles.h1)]
    out.append(layout.para(layout.t("which_intro")))
    for section in sections:
        out += section_flowables(layout, section)
    return out
