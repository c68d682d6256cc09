"""The compact terminal summary of a profile (a rich table); the JSON holds everything."""

from __future__ import annotations

from rich.table import Table

from profiles.model import Profile


def _tok(x: float) -> str:
    return f"{x:,.0f}"


def summary_table(p: Profile) -> Table:
    """Key figures of `p`: source, arrivals, lengths, prefix reuse, sessions, groups."""
    t = Table(title=f"capplan profile: {p.name}", show_header=True, header_style="bold")
    t.add_column("what")
    t.add_column("value", overflow="fold")
    s = p.source
    src = f"{s.format}, {s.rows:,} requests"
    if s.rows_skipped:
        src += f", {s.rows_skipped:,} skipped"
    if s.preset:
        src += f" (preset {s.preset})"
    t.add_row("source", src)
    if s.metrics is not None:
        m = s.metrics
        t.add_row(
            "metrics",
            f"{m.engine} {m.match or '(any)'}, {len(m.instances)} instance(s), "
            f"{m.step_s:g} s steps, {m.queries} queries",
        )
    if s.tokens_estimated:
        t.add_row("token counts", f"estimated with {s.tokenizer} (approximate where so named)")
    a = p.arrivals
    t.add_row(
        "span",
        f"{a.duration_s:,.1f} s" + (f" from {s.first_timestamp}" if s.first_timestamp else ""),
    )
    t.add_row("mean rate", f"{a.mean_rate_rps:.3f} req/s")
    t.add_row(
        "peak rate (1s / 10s / 60s)",
        " / ".join(f"{a.peak_rate_rps[w]:.2f}" for w in ("1s", "10s", "60s"))
        + "  (x mean: "
        + " / ".join(f"{a.peak_to_mean[w]:.2f}" for w in ("1s", "10s", "60s"))
        + ")",
    )
    if "60s" in a.window_rate_percentiles:
        t.add_row("p99 of 60 s window rates", f"{a.window_rate_percentiles['60s'][99]:.2f} req/s")
    cv = "n/a" if a.interarrival_cv is None else f"{a.interarrival_cv:.2f}"
    g = a.gamma_shape
    t.add_row(
        "inter-arrival CV / gamma shape",
        f"{cv} / moments {g.moments if g.moments is None else round(g.moments, 3)}, "
        f"MLE {g.mle if g.mle is None else round(g.mle, 3)}",
    )
    t.add_row("Fano (1s / 10s / 60s)", " / ".join(f"{a.fano[w]:.2f}" for w in ("1s", "10s", "60s")))
    t.add_row(
        "bursts",
        f"{len(a.bursts)}"
        + (f", highest {a.bursts[0].peak_rate_rps:.1f} req/s" if a.bursts else ""),
    )
    ln = p.lengths
    for label, st in (("input tokens", ln.input), ("output tokens", ln.output)):
        t.add_row(
            label,
            f"mean {st.mean:,.1f}  p50 {_tok(st.p50)}  p90 {_tok(st.p90)}  "
            f"p99 {_tok(st.p99)}  max {_tok(st.max)}",
        )
    if ln.input.bucket_edges is not None:
        t.add_row("lengths", "from histogram buckets: percentiles to the bucket's width")
    c = ln.classes
    t.add_row(
        "short / medium / long",
        f"{c.shares['short']:.1%} / {c.shares['medium']:.1%} / {c.shares['long']:.1%}  "
        f"(input <= {c.short_max_tokens}, >= {c.long_min_tokens})",
    )
    rc = "n/a" if ln.io_rank_correlation is None else f"{ln.io_rank_correlation:.3f}"
    t.add_row("input-output Spearman", rc)
    if p.ok_share is not None:
        t.add_row("ok share", f"{p.ok_share:.1%}")
    pr = p.prefix
    if pr.available and pr.ideal_hit_ratio is not None:
        t.add_row(
            "prefix hit ratio (unlimited)",
            f"{pr.ideal_hit_ratio:.3f}  ({pr.block_tokens}-token blocks, from {pr.hashes_from})",
        )
        if pr.lru_hit_ratio:
            pts = pr.lru_hit_ratio
            picks = (
                pts
                if len(pts) <= 4
                else [pts[i] for i in (0, len(pts) // 3, 2 * len(pts) // 3, -1)]
            )
            t.add_row(
                "LRU hit ratio",
                "  ".join(f"{q.cache_tokens:,} tok: {q.hit_ratio:.3f}" for q in picks),
            )
        if pr.top_prefixes_request_share is not None:
            t.add_row(
                "top shared prefixes",
                f"{len(pr.top_prefixes)} prefixes: "
                f"{pr.top_prefixes_request_share:.1%} of requests, "
                f"{(pr.top_prefixes_token_share or 0):.1%} of prompt tokens",
            )
    else:
        why = (
            "metrics hold no prompt hashes"
            if s.metrics
            else "no block ids or prompt text in the log"
        )
        t.add_row("prefix reuse", f"not available ({why})")
    if pr.reported_cached_token_ratio is not None:
        t.add_row("server-reported cached tokens", f"{pr.reported_cached_token_ratio:.3f}")
    for role, lat in p.observed.latency.items() if p.observed else ():
        t.add_row(
            f"observed {role} (server)",
            "  ".join(
                f"{k} {v:.3f} s"
                for k, v in (("p50", lat.p50_s), ("p95", lat.p95_s), ("p99", lat.p99_s))
                if v is not None
            ),
        )
    se = p.sessions
    if se.available and se.turns is not None:
        think = f", think time p50 {se.think_time_s.p50:.1f} s" if se.think_time_s else ""
        t.add_row(
            "sessions",
            f"{se.count:,}, turns mean {se.turns.mean:.2f} p90 {se.turns.p90:.0f}{think}",
        )
    if p.groups:
        t.add_row(
            f"groups by {p.group_by}",
            ", ".join(f"{k}: {v.requests:,}" for k, v in list(p.groups.items())[:8])
            + (" ..." if len(p.groups) > 8 else ""),
        )
    return t
