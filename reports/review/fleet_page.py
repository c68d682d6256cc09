"""Page 1 of the review: the fleet in one sentence, one row per service (and which limits are
the engine model's, predicted, not measured), GPU pools, risks."""

from __future__ import annotations

from reportlab.platypus import Flowable

from contracts.review import FleetChange, GpuPool, Review, Risk, ServiceReview
from reports.i18n.findings import finding_text
from reports.i18n.predicted_words import interval_source
from reports.review.layout import Layout


def fleet_sentence(r: Review, lay: Layout) -> str:
    f, w = r.fleet, lay.words
    by_type = ", ".join(f"{n} x {g}" for g, n in f.gpus_by_type.items())
    if r.change is not None:
        c = r.change
        change = lay.t(
            "fleet_change",
            prev=c.previous_name or "-",
            instances=lay.signed(c.instances),
            gpus=lay.signed(c.gpus),
            cost=lay.signed(c.monthly_cost_usd, money=True),
        ) + _change_parts(c, lay)
    else:
        change = lay.t("fleet_first")
    return lay.t(
        "fleet",
        instances=f.instances,
        gpus=f.gpus,
        by_type=by_type,
        cost=w.usd(f.monthly_cost_usd),
        change=change,
    )


def _change_parts(c: FleetChange, lay: Layout) -> str:
    """What the totals hide: services added and retired, GPUs per type that changed."""
    sep = lay.t("name_sep")
    text = ""
    if c.new_services:
        text += lay.t("fleet_new", names=sep.join(c.new_services))
    if c.removed_services:
        text += lay.t("fleet_retired", names=sep.join(c.removed_services))
    by_type = [f"{g} {lay.signed(n)}" for g, n in c.gpus_by_type.items() if n]
    if by_type:
        text += lay.t("fleet_by_type", types=sep.join(by_type))
    return text


def _change(s: ServiceReview, lay: Layout) -> str:
    if s.change is None:
        return "–"
    if s.change.status in ("new", "unchanged"):
        return lay.t(s.change.status)
    return f"{lay.signed(s.change.instances)} / {lay.signed(s.change.monthly_cost_usd, True)}"


def _count(s: ServiceReview) -> str:
    iv = s.count_interval
    if iv is None or (iv.low == iv.high == s.instances):
        return str(s.instances)
    return f"{s.instances} ({iv.level:.0%}: {iv.low}-{iv.high})"


def page_fleet(r: Review, lay: Layout) -> list[Flowable]:
    w = lay.words
    out: list[Flowable] = [
        lay.para(lay.t("title", name=r.name), lay.styles.title),
        lay.para(fleet_sentence(r, lay), lay.styles.answer),
        lay.h2(lay.t("services_heading")),
    ]
    head = [
        lay.t(k)
        for k in (
            "col_service",
            "col_peak",
            "col_limit",
            "col_instances",
            "col_gpus",
            "col_cost",
            "col_change",
            "col_risk",
        )
    ]
    rows: list[list[str]] = [head]
    for s in r.services:
        rows.append(
            [
                s.name,
                w.rate(s.peak_rps),
                w.load(s.per_instance_limit, s.unit),
                _count(s),
                f"{s.gpus} x {s.gpu}",
                w.usd(s.monthly_cost_usd),
                _change(s, lay),
                _risk(s.risks[0], lay) if s.risks else lay.t("none"),
            ]
        )
    out.append(lay.grid(rows, [0.11, 0.09, 0.11, 0.12, 0.13, 0.1, 0.12, 0.22]))
    out += [lay.para(text, lay.styles.warning) for text in predicted_lines(r, lay)]
    out.append(lay.h2(lay.t("pools_heading")))
    prow: list[list[str]] = [
        [
            lay.t(k)
            for k in (
                "col_gpu",
                "col_service",
                "col_for_load",
                "col_spares_each",
                "col_spares_shared",
                "col_cost",
                "col_cost_shared",
            )
        ]
    ]
    for p in r.pools:
        prow.append(
            [
                p.gpu,
                ", ".join(p.services),
                str(p.gpus_for_load),
                f"+{p.spare_gpus_per_service} = {p.gpus_per_service_spares}",
                f"+{p.spare_gpus_shared} = {p.gpus_shared_spares}",
                w.usd(p.monthly_cost_usd),
                w.usd(p.monthly_cost_shared_usd),
            ]
        )
    out.append(lay.grid(prow, [0.13, 0.22, 0.11, 0.15, 0.14, 0.12, 0.13]))
    if r.pools:
        out.append(lay.para(lay.t("pools_rule", rule=_pool_rule(r.pools[0], lay))))
    out.append(lay.h2(lay.t("risks_heading")))
    if r.risks:
        rrows = [[lay.t("col_level"), lay.t("col_service"), lay.t("col_what")]]
        rrows += [[lay.t(f"level_{x.level}"), x.service, _risk(x, lay)] for x in r.risks]
        out.append(lay.grid(rrows, [0.1, 0.16, 0.74]))
    else:
        out.append(lay.para(lay.t("no_risks")))
    return out


def predicted_lines(r: Review, lay: Layout) -> list[str]:
    """'Predicted, not measured' with the interval, for each service whose plan rests on the
    engine model's limit (a limit.json of capplan's emulator), not a GPU's."""
    w = lay.words
    out: list[str] = []
    for s in r.services:
        limit = s.plan.inputs.limit
        if limit.predicted is None:
            continue
        out.append(
            w.t(
                "predicted_service",
                service=s.name,
                limit=w.load(limit.value, limit.unit),
                low=w.load(limit.predicted.low, limit.unit),
                high=w.load(limit.predicted.high, limit.unit),
                source=interval_source(w.t, limit.predicted.source),
            )
        )
    return out


def _risk(risk: Risk, lay: Layout) -> str:
    return finding_text(lay.words, risk.finding, risk.text)


def _pool_rule(pool: GpuPool, lay: Layout) -> str:
    return finding_text(lay.words, pool.rule_finding, pool.rule)
