"""The lessons of a whatif run: which methods pay off on this workload, by how much, and why.

A lesson compares candidates that differ in one knob only (same GPU, tp and other knobs):
the median relative change of the predicted limit over those pairs, and the one figure that
explains it (the profile's prefix reuse, the KV cache against the contexts in flight, the
short- and long-prompt P99 at the same load, ...). GPUs are compared by the cheapest fleet
each one offers at the same SLO.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from contracts.finding import Finding, FindingValue
from contracts.whatif import CLEAR_CHANGE, Lesson, WhatifCandidate
from planner.capacity.plan import mean_context_tokens
from planner.engine import EngineConfig, kv_bytes_per_token, weight_bytes
from planner.whatif.disagg import instances_per_unit, parse_disagg
from planner.whatif.virtual import split_at
from profiles.model import Profile

if TYPE_CHECKING:
    from planner.whatif.options import WhatifOptions

Figure = Callable[["_Pair"], list[Finding]]


class _Pair:
    def __init__(
        self,
        profile: Profile,
        options: WhatifOptions,
        base: WhatifCandidate,
        alt: WhatifCandidate,
        configs: Mapping[str, EngineConfig | None],
        max_len: int,
    ) -> None:
        self.profile = profile
        self.options = options
        self.base = base
        self.alt = alt
        self.base_config = configs.get(base.label)
        self.alt_config = configs.get(alt.label)
        self.max_len = max_len


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def _prefix(p: _Pair) -> list[Finding]:
    ideal = p.profile.prefix.ideal_hit_ratio
    replayed = p.alt.shared_prompt_share
    key = "figure.prefix" if ideal is not None else "figure.prefix_none"
    if replayed is not None:
        key += "_replayed"
    return [Finding(key=key, values={"ideal": ideal, "replayed": replayed})]


def _kv_needed(p: _Pair, c: WhatifCandidate) -> float | None:
    if c.concurrency_at_limit is None:
        return None
    return c.concurrency_at_limit * mean_context_tokens(p.profile.lengths.sampler.pairs)


def _kv_setting(c: WhatifCandidate) -> str:
    """The candidate's KV format, varied as kv_dtype or as vLLM's kv_cache_dtype."""
    return c.settings.get("kv_cache_dtype") or c.settings["kv_dtype"]


def _quantization(p: _Pair) -> list[Finding]:
    if p.base_config is None or p.alt_config is None:
        return [Finding(key="figure.none")]
    values: dict[str, FindingValue] = {
        "fmt": p.alt.settings["quantization"],
        "base_fmt": p.base.settings["quantization"],
        "alt_gb": weight_bytes(p.alt_config) / 1e9,
        "base_gb": weight_bytes(p.base_config) / 1e9,
        "alt_tokens": p.alt.kv_capacity_tokens,
        "base_tokens": p.base.kv_capacity_tokens,
    }
    return [Finding(key="figure.quantization", values=values)]


def _kv_dtype(p: _Pair) -> list[Finding]:
    need = _kv_needed(p, p.base)
    out = [
        Finding(
            key="figure.kv_dtype",
            values={
                "alt_tokens": p.alt.kv_capacity_tokens,
                "dtype": _kv_setting(p.alt),
                "base_tokens": p.base.kv_capacity_tokens,
            },
        )
    ]
    if need is not None and p.base.kv_capacity_tokens:
        share = need / p.base.kv_capacity_tokens
        values: dict[str, FindingValue] = {
            "dtype": _kv_setting(p.base),
            "need": need,
            "share": share,
        }
        out.append(Finding(key="figure.kv_dtype_need", values=values))
    return out


def _reservation(p: _Pair) -> list[Finding]:
    running = p.base.concurrency_at_limit
    values: dict[str, FindingValue] = {
        "max_len": p.max_len,
        "seqs": p.base.kv_capacity_tokens // p.max_len,
        "ctx": mean_context_tokens(p.profile.lengths.sampler.pairs),
        "running": running,
    }
    key = "figure.reservation" + ("_running" if running is not None else "")
    return [Finding(key=key, values=values)]


def _queue(p: _Pair) -> list[Finding]:
    """Short and long P99 TTFT of both policies at the same load (the baseline's limit)."""
    rate = p.base.limit_rps
    if rate is None or p.base_config is None or p.alt_config is None:
        return [Finding(key="figure.no_common_load")]
    b, a = (
        split_at(
            p.profile,
            cfg,
            p.options.slo,
            rate,
            p.options.rules(),
            p.options.seed,
            p.options.fixed_level_s,
        )
        for cfg in (p.base_config, p.alt_config)
    )
    values: dict[str, FindingValue] = {
        "rate": rate,
        "short_max": b.short_max_tokens,
        "base_short": _fmt_s(b.short_ttft_p99_s),
        "alt_short": _fmt_s(a.short_ttft_p99_s),
        "long_min": b.long_min_tokens,
        "base_long": _fmt_s(b.long_ttft_p99_s),
        "alt_long": _fmt_s(a.long_ttft_p99_s),
    }
    return [Finding(key="figure.queue", values=values)]


def _spec(p: _Pair) -> list[Finding]:
    cfg = p.alt_config
    k = cfg.spec_draft_tokens if cfg is not None else 0
    gain = cfg.spec_tokens_per_step if cfg is not None else 1.0
    out = [Finding(key="figure.spec", values={"gain": gain, "positions": k + 1, "drafts": k})]
    running = p.base.concurrency_at_limit
    if running:
        out.append(Finding(key="figure.spec_running", values={"running": running}))
    return out


def _seqs(p: _Pair) -> list[Finding]:
    running = p.base.concurrency_at_limit
    if not running:
        return [Finding(key="figure.none")]
    return [Finding(key="figure.seqs", values={"running": running})]


def _budget(p: _Pair) -> list[Finding]:
    pairs = p.profile.lengths.sampler.pairs
    mean_in = sum(i for i, _ in pairs) / len(pairs)
    return [Finding(key="figure.budget", values={"mean_in": mean_in})]


def _memory(p: _Pair) -> list[Finding]:
    values: dict[str, FindingValue] = {
        "base": p.base.kv_capacity_tokens,
        "alt": p.alt.kv_capacity_tokens,
    }
    return [Finding(key="figure.memory", values=values)]


def _disagg(p: _Pair) -> list[Finding]:
    """The KV transfer of the mean prompt, and TTFT / TPOT p95 at each candidate's limit."""
    spec = parse_disagg(p.alt.settings["disaggregation"], p.options.kv_link_bandwidth_bytes_per_s)
    pairs = p.profile.lengths.sampler.pairs
    mean_in = sum(i for i, _ in pairs) / len(pairs)
    mean_out = sum(o for _, o in pairs) / len(pairs)
    transfer = (
        Finding(
            key="figure.disagg_transfer",
            values={
                "mean_in": mean_in,
                "mean_out": mean_out,
                "mb": mean_in * kv_bytes_per_token(p.alt_config) / 1e6,
                "ms": spec.transfer_s(p.alt_config, round(mean_in)) * 1e3,
            },
        )
        if spec is not None and p.alt_config is not None
        else Finding(key="figure.disagg_no_transfer")
    )

    def tpot(c: WhatifCandidate) -> str:
        return "-" if c.tpot_p95_s is None else f"{c.tpot_p95_s * 1e3:.0f} ms"

    values: dict[str, FindingValue] = {
        "base_ttft": _fmt_s(p.base.ttft_p95_s),
        "base_tpot": tpot(p.base),
        "alt_ttft": _fmt_s(p.alt.ttft_p95_s),
        "alt_tpot": tpot(p.alt),
    }
    return [transfer, Finding(key="figure.disagg_at", values=values)]


def _engine_traits(c: WhatifCandidate, cfg: EngineConfig | None) -> Finding:
    """One engine on one candidate: how it holds its KV, how much, its CPU per request."""
    if cfg is None:
        return Finding(key="figure.engine_none", values={"engine": c.settings["engine"]})
    values: dict[str, FindingValue] = {
        "engine": cfg.engine,
        "max_len": cfg.effective_max_model_len,
        "kv": c.kv_capacity_tokens,
        "us": cfg.seq_overhead_s * 1e6,
    }
    key = f"figure.engine_{cfg.kv_reservation}" + ("_prefill_first" if cfg.prefill_first else "")
    return Finding(key=key, values=values)


def _engine_findings(c: WhatifCandidate, cfg: EngineConfig | None) -> list[Finding]:
    """`_engine_traits`, and SGLang's admission reserve where the engine holds one."""
    traits = [_engine_traits(c, cfg)]
    if cfg is not None and cfg.admission_reserve:
        traits.append(Finding(key="figure.engine_reserve", values={"engine": cfg.engine}))
    return traits


def _engine(p: _Pair) -> list[Finding]:
    """What sets the two engines apart on this traffic: KV held per request, CPU per step."""
    ctx = mean_context_tokens(p.profile.lengths.sampler.pairs)
    return [
        *_engine_findings(p.base, p.base_config),
        *_engine_findings(p.alt, p.alt_config),
        Finding(key="figure.engine_context", values={"ctx": ctx}),
    ]


def figure_text(findings: list[Finding]) -> str:
    """A lesson's figure in English: its findings, one clause each."""
    return "; ".join(f.english() for f in findings)


FIGURES: dict[str, Figure] = {
    "engine": _engine,
    "prefix_caching": _prefix,
    "kv_dtype": _kv_dtype,
    "kv_cache_dtype": _kv_dtype,
    "quantization": _quantization,
    "kv_reservation": _reservation,
    "queue_policy": _queue,
    "speculative": _spec,
    "max_num_seqs": _seqs,
    "max_num_batched_tokens": _budget,
    "gpu_memory_utilization": _memory,
    "disaggregation": _disagg,
}


def _pairs(
    candidates: list[WhatifCandidate], knob: str, base_value: str, alt_value: str
) -> list[tuple[WhatifCandidate, WhatifCandidate]]:
    def key(c: WhatifCandidate) -> tuple[object, ...]:
        rest = tuple(sorted((k, v) for k, v in c.settings.items() if k != knob))
        return (c.gpu, c.tp, rest)

    bases = {key(c): c for c in candidates if c.settings.get(knob) == base_value}
    return [
        (bases[key(c)], c)
        for c in candidates
        if c.settings.get(knob) == alt_value and key(c) in bases
    ]


def knob_lessons(
    profile: Profile,
    options: WhatifOptions,
    candidates: list[WhatifCandidate],
    configs: Mapping[str, EngineConfig | None],
    max_len: int,
) -> list[Lesson]:
    """One lesson per varied knob and alternative value against the baseline value."""
    out: list[Lesson] = []
    for knob, values in options.vary.items():
        for alt_value in values[1:]:
            # A configuration that cannot run at all (TensorRT-LLM on an MI300X) says nothing of
            # what the knob does; it counted as a lost limit, -100 %.
            pairs = [
                (b, a)
                for b, a in _pairs(candidates, knob, values[0], alt_value)
                if b.cannot_run is None and a.cannot_run is None
            ]
            if not pairs:
                continue
            # Per instance: a disaggregated unit of p + d instances against one aggregated.
            changes = [
                (a.limit_rps / instances_per_unit(a.settings))
                / (b.limit_rps / instances_per_unit(b.settings))
                - 1.0
                for b, a in pairs
                if a.limit_rps is not None and b.limit_rps
            ]
            # The lost limit of a candidate that meets the SLO at no rate counts as -100 %.
            changes += [-1.0 for b, a in pairs if b.limit_rps and a.limit_rps is None]
            change = statistics.median(changes) if changes else None
            base, alt = pairs[0]
            figures = FIGURES[knob](_Pair(profile, options, base, alt, configs, max_len))
            figure = figure_text(figures)
            verdict = (
                "no prediction"
                if change is None
                else f"{_signed_pct(change)} limit"
                + (" per GPU" if knob == "disaggregation" else "")
                + (
                    " (pays off)"
                    if change >= CLEAR_CHANGE
                    else " (hurts)"
                    if change <= -CLEAR_CHANGE
                    else f" (within two searches' noise, ±{CLEAR_CHANGE:.0%})"
                )
                + (
                    f" (median of {len(changes)}: {_signed_pct(min(changes))} to "
                    f"{_signed_pct(max(changes))})"
                    if min(changes) < -0.005 and max(changes) > 0.005
                    else ""
                )
            )
            out.append(
                Lesson(
                    knob=knob,
                    baseline=values[0],
                    alternative=alt_value,
                    limit_change=change,
                    pairs=len(pairs),
                    figure=figure,
                    figure_findings=figures,
                    sentence=f"{knob} {alt_value} vs {values[0]}: {verdict}; {figure}",
                )
            )
    return out


def _signed_pct(x: float) -> str:
    """+5%, -27%, and 0% (not -0%) for a change that rounds to nothing."""
    return "0%" if round(x * 100) == 0 else f"{x:+.0%}"


def gpu_lessons(candidates: list[WhatifCandidate]) -> list[Lesson]:
    """The cheapest fleet on each GPU against the cheapest overall, at the same SLO."""
    best: dict[str, WhatifCandidate] = {}
    for c in candidates:
        if c.monthly_cost_usd is None:
            continue
        if c.gpu not in best or c.monthly_cost_usd < (best[c.gpu].monthly_cost_usd or 0):
            best[c.gpu] = c
    if len(best) < 2:
        return []
    ranked = sorted(best.values(), key=lambda c: c.monthly_cost_usd or 0.0)
    top = ranked[0]
    out = []
    for other in ranked[1:]:
        assert top.monthly_cost_usd is not None and other.monthly_cost_usd is not None
        saving = 1.0 - top.monthly_cost_usd / other.monthly_cost_usd
        figure = (
            f"{top.instances} x {top.label} (${top.monthly_cost_usd:,.0f}/month, "
            f"{top.limit_rps:.3g} req/s each) against {other.instances} x {other.label} "
            f"(${other.monthly_cost_usd:,.0f}/month, {other.limit_rps:.3g} req/s each)"
        )
        out.append(
            Lesson(
                knob="gpu",
                baseline=other.gpu,
                alternative=top.gpu,
                limit_change=None,
                pairs=1,
                figure=figure,
                sentence=f"for this traffic, a {top.gpu} fleet costs {saving:.0%} less than "
                f"{other.gpu} at the same SLO: {figure}",
            )
        )
    return out


RANKING_MARGIN = 0.10  # twice the limit search's 5 % tolerance


def _engine_why(c: WhatifCandidate, cfg: EngineConfig | None, mean_ctx: float) -> str:
    """One engine at its limit on one configuration: what it holds and spends."""
    if cfg is None or c.limit_rps is None:
        return f"{c.settings['engine']} has no limit here"
    running = c.concurrency_at_limit
    use = f"; {running:.1f} in flight x {mean_ctx:,.0f} tokens" if running else ""
    traits = figure_text(_engine_findings(c, cfg))
    return f"{c.limit_rps:.3g} req/s: {traits}{use}"


def engine_rankings(
    profile: Profile,
    candidates: list[WhatifCandidate],
    configs: Mapping[str, EngineConfig | None],
) -> list[Lesson]:
    """Where the engines' order changes with the configuration: one sentence for each GPU,
    tp and other knobs on which an engine carries over RANKING_MARGIN more than the next,
    with each engine's limit and what it holds and spends there (only when such winners
    are not the same engine everywhere)."""
    groups: dict[str, dict[str, WhatifCandidate]] = {}
    for c in candidates:
        # an engine that cannot run a configuration (or meets the SLO at no load) is not
        # ranked on it: it has no limit to compare
        if "engine" in c.settings and c.limit_rps:
            rest = " ".join([f"{c.gpu} tp{c.tp}"] + [
                f"{k}={v}" for k, v in c.settings.items() if k != "engine"
            ])  # fmt: skip
            groups.setdefault(rest, {})[c.settings["engine"]] = c
    winners: dict[str, str] = {}
    for rest, by in groups.items():
        limits = sorted((c.limit_rps or 0.0 for c in by.values()), reverse=True)
        # A lead inside twice the search's tolerance is no ranking: the limits are estimates.
        if len(limits) > 1 and limits[0] > (1.0 + RANKING_MARGIN) * limits[1]:
            top = max(by.values(), key=lambda c: c.limit_rps or 0.0)
            winners[rest] = top.settings["engine"]
    if len(set(winners.values())) < 2:
        return []
    mean_ctx = mean_context_tokens(profile.lengths.sampler.pairs)
    out = []
    for rest, winner in winners.items():
        ranked = sorted(groups[rest].values(), key=lambda c: -(c.limit_rps or 0.0))
        why = "; ".join(_engine_why(c, configs.get(c.label), mean_ctx) for c in ranked)
        out.append(
            Lesson(
                knob="engine ranking",
                baseline=ranked[-1].settings["engine"],
                alternative=winner,
                limit_change=None,
                pairs=len(ranked),
                figure=why,
                where=rest,
                sentence=f"on {rest}, {winner} ranks first: {why}",
            )
        )
    return out


def lessons_for(
    profile: Profile,
    options: WhatifOptions,
    candidates: list[WhatifCandidate],
    configs: Mapping[str, EngineConfig | None],
    max_len: int,
) -> list[Lesson]:
    """Knob lessons, where engines rank configurations differently, the GPU comparison."""
    return (
        knob_lessons(profile, options, candidates, configs, max_len)
        + engine_rankings(profile, candidates, configs)
        + gpu_lessons(candidates)
    )
