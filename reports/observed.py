"""The "Observed capacity beside the load test" section: what each instance carried in
production while its server's own latency histograms met the SLO, beside the load-tested limit
(plan.json's `observed`, a profile read from Prometheus). The capacity baseline shows it on its
limit page, the quarterly review in each service's section."""

from __future__ import annotations

from reportlab.platypus import Flowable

from contracts.plan import ObservedCapacity
from reports.layout import Layout


def observed_section(o: ObservedCapacity, limit: float, unit: str, lay: Layout) -> list[Flowable]:
    """The heading, the sentence (contradicted or not) and a row per instance; `limit` is the
    load-tested per-instance limit in `unit`."""
    w = lay.words
    checked = ", ".join(o.checked)
    out: list[Flowable] = [lay.para(w.t("observed_heading"), lay.styles.h2)]
    if o.carried_rps is None:
        text = w.t("observed_never", checked=checked)
    else:
        text = w.t(
            "observed_sentence",
            carried=w.load(o.carried_rps, "rps"),
            checked=checked,
            window=f"{o.window_s / 60:g}",
            limit=w.load(limit, unit),
        )
    if o.missed_min_rps is not None:
        key = "observed_contradicts" if o.contradicts_limit else "observed_missed"
        text += " " + w.t(key, missed=w.load(o.missed_min_rps, "rps"))
    out.append(lay.para(text))
    columns = ("instance", "carried", "observed_at", "missed_from", "windows")
    rows = [[w.t(f"obs_col_{k}") for k in columns]]
    for r in o.instances:
        at = ", ".join(f"{k} {w.seconds(v)}" for k, v in r.carried_at.items())
        rows.append(
            [r.instance, w.load(r.carried_rps, "rps"), at or "–", w.load(r.missed_min_rps, "rps"),
             f"{r.windows_met} / {r.windows_missed}"]
        )  # fmt: skip
    out.append(lay.grid(rows, [0.26, 0.16, 0.26, 0.16, 0.16]))
    return out
