"""A finding the planner states in words, stored as a key and its figures (`Finding`), and its
English wording: the text plan.json and review.json keep beside it, and the console prints.

The planner writes each risk, note and rule as a `Finding`; a report words it in its own
language from the key (`reports.i18n.findings` holds the Chinese), so a Chinese report has no
English sentence in it. English lives here, once, because the stored text is written from it.
"""

from __future__ import annotations

import string

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import InputError

FindingValue = str | int | float | bool | None


class Finding(BaseModel):
    """One sentence as data: `key` names its wording, `values` are its figures (unformatted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="names the wording, e.g. 'risk.kv_headroom'")
    values: dict[str, FindingValue] = Field(default_factory=dict)

    def english(self) -> str:
        """The finding in English; raises InputError for an unknown key or a missing figure."""
        return word_finding(FINDINGS_EN, self)


def word_finding(table: dict[str, str], finding: Finding) -> str:
    """`finding` worded by `table` (key -> str.format template over its values)."""
    try:
        template = table[finding.key]
    except KeyError as err:
        raise InputError(
            f"no wording for the finding {finding.key!r}; known: {', '.join(sorted(table))}"
        ) from err
    try:
        return template.format(**finding.values)
    except (KeyError, ValueError) as err:
        raise InputError(f"finding {finding.key!r} lacks a figure: {err}") from err


def template_fields(template: str) -> set[str]:
    """The value names a wording template uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


# The wording of every finding in English: str.format templates over the finding's values.
FINDINGS_EN: dict[str, str] = {
    # review risks (planner.review.risks)
    "risk.count_interval": "the count may be short: {level:.0%} interval {low}-{high} instances "
    "(driven by the {dominant})",
    "risk.growth": "the logs' trend projects x{growth:.2f} by {horizon}, above the "
    "x{assumed:g} assumed",
    "risk.kv_headroom": "KV cache headroom at the limit is {kv:.0%} on {gpu} x {tp}",
    "risk.fleet_check": "fleet simulation: {verdict}",
    "risk.observed_capacity": "production missed the SLO from {missed:.2f} req/s per instance "
    "({minutes:g}-minute windows), below the load-tested limit {limit_rps:.2f}",
    "risk.bursts": "10 s bursts reach {burst:.1f}x the planning peak; headroom {headroom:.0%}",
    "risk.limit_given": "the limit {limit} is given, not measured",
    "risk.preset": "traffic from a preset profile, not this service's logs",
    # the review's methods and rules (planner.review)
    "review.count_method": "moving-block bootstrap of the window rates (blocks of about "
    "sqrt(n) windows) for the planning peak, the limit drawn log-uniformly between the last "
    "certain pass and the first failure of the search; the plan's rule counts each pair",
    "review.count_method_predicted": "moving-block bootstrap of the window rates (blocks of "
    "about sqrt(n) windows) for the planning peak; the limit is predicted, not measured, and "
    "drawn log-uniformly across its interval (where published server results put a GPU's "
    "limit around the engine model's) and the search's bracket; the plan's rule counts each "
    "pair",
    "review.pool_rule": "shared spares: the GPUs for load plus only the spares of the service "
    "that keeps the most (its k spare instances x TP GPUs, not its N+k), priced at the pool's "
    "highest GPU-hour price",
    "review.option_peak_all_day": "{top} instances every hour (the highest hour of the log)",
    "review.option_fixed_schedule": "per hour of day, the most any covered day of that type needed",
    "review.option_fixed_schedule_split": "per hour of day, the most any covered day of that "
    "type needed (weekdays and weekends apart)",
    "review.option_autoscaled": "each clock hour's own need; new instances start "
    "{delay_s:g} s before a rise (model load time)",
    "review.trend": "{model} fit of {weeks} weekly peaks (R² {r2:.2f}; {other_model} "
    "{r2_other:.2f}): {weekly:+.1%} per week; to {horizon} ({ahead:.1f} weeks) x{growth:.2f} "
    "({level:.0%}: x{low:.2f}-x{high:.2f})",
    # the plan (planner.capacity.plan)
    "plan.sentence": "Plan {instances} instance(s) of {model} on {gpu} x {tp} ({gpus} GPUs, "
    "${monthly_usd:,.0f}/month at ${price:g}/GPU-hour) for a peak of {peak_rps:.3g} req/s "
    "({peak_definition}) x {growth:g} growth, with {headroom:.0%} headroom and N+{redundancy}.",
    "plan.host_rule": "CPU cores = {cores_base} + {cores_per_gpu} x GPUs per instance; host RAM "
    "= {ram_base:g} GiB + {ram_per_memory:g} x the instance's GPU memory (ratios of NVIDIA DGX "
    "H100: 14 cores, 2x GPU memory per GPU)",
    "note.e2e_simulated": "e2e at the limit ({e2e_s:.2f} s) is simulated: one {gpu} instance "
    "of the engine model at the limit, not measured",
    "note.kv_short": "the KV cache holds {capacity:,} tokens but the limit's concurrency needs "
    "{needed:,.0f}: requests will queue or be preempted; raise --tp or pick a larger GPU",
    "note.limit_unconfirmed": "the per-instance limit ({limit}) is unconfirmed: "
    "its search stopped before it confirmed its answer (planned with --accept-unconfirmed); "
    "finish it (capplan limit --resume) and plan again",
    "note.kv_short_simulated": "the engine model queues at the limit given "
    "({limit_rps:.3g} req/s): its simulated e2e there is {e2e_s:.1f} s, a concurrency "
    "whose KV ({needed:,.0f} tokens) is "
    "more than the cache holds ({capacity:,}); it expects less of this GPU than that limit, so "
    "check the limit, or calibrate the model on the run that measured it (capplan calibrate)",
    "note.observed_contradicts": "production contradicts the limit: an instance missed the SLO "
    "from {missed:.2f} req/s ({minutes:g}-minute windows of its server's histograms), below the "
    "load-tested {limit_rps:.2f} req/s",
    "note.fleet_no_slo": "fleet check skipped: no SLO (give --slo or a limit.json)",
    "note.fleet_slo_metrics": "fleet check skipped: the SLO names {missing}, which the fleet "
    "simulator does not produce (it yields {simulated})",
    "note.calibrated": "engine model calibrated to {levels} measured levels: mfu {mfu:.3g}, "
    "mbu {mbu:.3g}, step overhead {overhead_ms:.3g} ms; mean relative error {mean_err:.1%} "
    "(max {max_err:.1%}; uncalibrated {default_err:.1%}) over {metrics}",
    "note.calibrated_reproduces": "engine model calibrated to {levels} measured levels: mfu "
    "{mfu:.3g}, mbu {mbu:.3g}, step overhead {overhead_ms:.3g} ms; mean relative error "
    "{mean_err:.1%} (max {max_err:.1%}; uncalibrated {default_err:.1%}) over {metrics}; the "
    "simulated instance reproduces the measured limit",
    "note.calibrated_misses": "engine model calibrated to {levels} measured levels: mfu "
    "{mfu:.3g}, mbu {mbu:.3g}, step overhead {overhead_ms:.3g} ms; mean relative error "
    "{mean_err:.1%} (max {max_err:.1%}; uncalibrated {default_err:.1%}) over {metrics}; the "
    "simulated instance does NOT reproduce the measured limit",
    "fleet.slo_metrics": "the SLO names {missing}, which the fleet simulator does not produce "
    "(it yields {simulated})",
    "note.no_calibration": "no calibration: the limit.json levels carry no latency metrics",
    # the figure that explains a what-if lesson, one clause each (planner.whatif.lessons)
    "figure.none": "-",
    "figure.prefix": "{ideal:.0%} of prompt tokens are in shared blocks in the profile",
    "figure.prefix_replayed": "{ideal:.0%} of prompt tokens are in shared blocks in the "
    "profile ({replayed:.0%} in the replayed traffic)",
    "figure.prefix_none": "the profile has no prefix statistics",
    "figure.prefix_none_replayed": "the profile has no prefix statistics ({replayed:.0%} in the "
    "replayed traffic)",
    "figure.kv_dtype": "the KV cache holds {alt_tokens:,} tokens with {dtype} against "
    "{base_tokens:,}",
    "figure.quantization": "weights take {alt_gb:.1f} GB per GPU with {fmt} against "
    "{base_gb:.1f} GB with {base_fmt}; the KV cache holds {alt_tokens:,} tokens against "
    "{base_tokens:,}",
    "figure.kv_dtype_need": "at the {dtype} limit the requests in flight need {need:,.0f} "
    "tokens ({share:.0%} of its cache)",
    "figure.reservation": "static reserves {max_len:,} tokens per sequence: at most {seqs:,} "
    "sequences fit, while a request in flight holds {ctx:,.0f} tokens on average",
    "figure.reservation_running": "static reserves {max_len:,} tokens per sequence: at most "
    "{seqs:,} sequences fit, while a request in flight holds {ctx:,.0f} tokens on average and "
    "paged ran {running:.1f} at its limit",
    "figure.no_common_load": "no common load to compare at",
    "figure.queue": "at {rate:.3g} req/s, P99 TTFT of short prompts (<= {short_max} tokens) "
    "{base_short} -> {alt_short}, of long prompts (>= {long_min}) {base_long} -> {alt_long}",
    "figure.spec": "{gain:.2f} tokens per decode step for {positions} verified positions and "
    "{drafts} draft passes",
    "figure.spec_running": "{running:.0f} requests in flight at the limit",
    "figure.seqs": "{running:.1f} requests in flight at the baseline limit",
    "figure.budget": "mean prompt {mean_in:,.0f} tokens against the per-step token budget",
    "figure.memory": "KV cache {base:,} -> {alt:,} tokens",
    "figure.disagg_transfer": "the mean prompt ({mean_in:,.0f} tokens, {mean_out:,.0f} out) "
    "moves {mb:,.1f} MB of KV in {ms:.2f} ms",
    "figure.disagg_no_transfer": "no KV transfer",
    "figure.disagg_at": "at the limits TTFT p95 {base_ttft}, TPOT p95 {base_tpot} -> TTFT p95 "
    "{alt_ttft}, TPOT p95 {alt_tpot}",
    "figure.engine_none": "{engine}: no configuration",
    "figure.engine_paged": "{engine} pages its KV as tokens arrive (recompute preemption), "
    "{kv:,} KV tokens, {us:.0f} us CPU per request per step",
    "figure.engine_request": "{engine} reserves prompt + output KV at admission (no "
    "preemption), {kv:,} KV tokens, {us:.0f} us CPU per request per step",
    "figure.engine_static": "{engine} reserves {max_len:,} tokens per sequence, {kv:,} KV "
    "tokens, {us:.0f} us CPU per request per step",
    "figure.engine_paged_prefill_first": "{engine} pages its KV as tokens arrive (recompute "
    "preemption), {kv:,} KV tokens, {us:.0f} us CPU per request per step, prefills alone",
    "figure.engine_request_prefill_first": "{engine} reserves prompt + output KV at admission "
    "(no preemption), {kv:,} KV tokens, {us:.0f} us CPU per request per step, prefills alone",
    "figure.engine_static_prefill_first": "{engine} reserves {max_len:,} tokens per sequence, "
    "{kv:,} KV tokens, {us:.0f} us CPU per request per step, prefills alone",
    "figure.engine_reserve": "{engine} admits a request only while its prompt and output "
    "fit the free KV less a share of the running requests' tokens to come",
    "figure.engine_context": "a request holds {ctx:,.0f} tokens on average",
    # the fleet simulation's verdict (planner.fleet.check)
    "fleet.not_simulated": "n={instances} was not simulated",
    "fleet.short": "n={instances} does NOT meet the SLO in simulation: plan more instances",
    "fleet.short_needs": "n={instances} does NOT meet the SLO in simulation: plan more "
    "instances; the simulation needs n={needed}",
    "fleet.short_routing": "n={instances} does NOT meet the SLO in simulation (only with "
    "{routings} routing): plan more instances",
    "fleet.short_routing_needs": "n={instances} does NOT meet the SLO in simulation (only with "
    "{routings} routing): plan more instances; the simulation needs n={needed}",
    "fleet.meets": "n={instances} meets the SLO in simulation",
    "fleet.meets_with_spare": "n={instances} meets the SLO, and so does n-1={below}: the "
    "headroom and redundancy are buffer above the simulated need",
    "fleet.meets_tight": "n={instances} meets the SLO, n-1={below} does not",
    # the fleet measured behind a load balancer (planner.verify)
    "verify.holds": "n={serving} of {planned} planned instances held the SLO {slo} at the "
    "design peak of {rate:.3g} req/s (attainment {attainment:.1%}; the plan simulated "
    "{sim_attainment:.1%}) and recovered {recovery:.0f} s after a {burst_s:g} s burst",
    "verify.fails_peak": "n={serving} of {planned} planned instances did NOT hold the SLO {slo} "
    "at the design peak of {rate:.3g} req/s (attainment {attainment:.1%}; the plan simulated "
    "{sim_attainment:.1%})",
    "verify.no_window": "n={serving} of {planned} planned instances reached no steady window "
    "at the design peak of {rate:.3g} req/s: the warm-up the steady-state rules ask for "
    "({warmup_s:.0f} s) filled the whole {duration_s:.0f} s stage (the queue did not settle), "
    "so nothing was judged against the SLO {slo}",
    "verify.fails_recovery": "n={serving} of {planned} planned instances held the SLO {slo} at "
    "the design peak of {rate:.3g} req/s but did NOT recover from a {burst_s:g} s burst",
    "verify.invalid": "the test of n={serving} of {planned} planned instances at {rate:.3g} "
    "req/s is not valid: {reason}",
}
