"""The capacity-baseline report's words in English (the same keys as `zh`; a test checks it)."""

EN: dict[str, str] = {
    "doc_title": "Capacity baseline: {name}",
    "subtitle": "{model} on {gpu} (TP {tp}) · SLO {slo} · generated {date}",
    "footer": "capplan capacity baseline · {name} · generated {date}",
    "page_of": "page {n} of {total}",
    # page 1
    "answer_heading": "The answer",
    "answer_rate": (
        "Serve a peak of {peak} ({peak_def}) within {slo} on {n} × {gpu} "
        "({load} + {spare} spare), about {cost} per month."
    ),
    "answer_users": (
        "Serve a peak of {peak} concurrent users ({peak_def}) within {slo} on {n} × {gpu} "
        "({load} + {spare} spare), about {cost} per month."
    ),
    "peak_def_quantile": "p{q} of {window} window rates",
    "peak_def_given": "peak given by the planner's user",
    "key_figures": "Key figures",
    "fig_peak": "Planning peak demand",
    "fig_limit": "Per-instance SLO limit",
    "fig_limit_value": "{value} ({binding} binds first; {fail} fails)",
    "fig_limit_value_short": "{value} ({binding} binds first)",
    "fleet_warning": (
        "Caution: in the fleet simulation {n} instances do not meet the SLO; "
        "see the fleet-simulation check."
    ),
    "limit_given_answer": (
        "The per-instance limit of {limit} was given, not measured: this report holds no load "
        "test of it (its load-test and limit pages are left out)."
    ),
    "observed_warning": (
        "Caution: production missed the SLO from {missed} per instance, below the load-tested "
        "limit; see 'Observed capacity beside the load test'."
    ),
    "fig_instances": "Instances",
    "fig_instances_value": "{n} ({load} for the load + {spare} spare)",
    "fig_gpus": "GPUs",
    "fig_cost": "Cost per month",
    "fig_growth": "Growth scenarios",
    "fig_growth_value": "×{growth}: {n} instances, {cost}",
    "compare_heading": "Against the previous baseline",
    "compare_previous": "Previous ({name})",
    "compare_this": "This plan",
    "compare_change": "Change",
    "compare_demand": "Peak demand",
    "compare_limit": "Per-instance limit",
    "compare_instances": "Instances",
    "compare_gpus": "GPUs",
    "compare_cost": "Cost per month",
    "risks_heading": "The three biggest risks",
    "risk_high": "HIGH",
    "risk_medium": "WATCH",
    "risk_low": "LOW",
    "risk_burst": "Burst recovery",
    "risk_burst_recovered": (
        "After the burst at {burst} ({burst_ratio}× the steady load), TTFT p95 took "
        "{recovery} to return to normal; during the burst TTFT p95 reached {burst_p95}."
    ),
    "risk_burst_not_recovered": (
        "After the burst at {burst} ({burst_ratio}× the steady load), TTFT p95 did not "
        "return to normal before the test ended; during the burst it reached {burst_p95}."
    ),
    "risk_burst_nothing_completed": (
        "During the burst at {burst} ({burst_ratio}× the steady load) no request completed "
        "successfully."
    ),
    "risk_burst_recovered_after": " TTFT p95 was back to normal {recovery} after it.",
    "risk_burst_unmeasured": (
        "No burst-recovery stage was measured; the plan's bursts are not tested."
    ),
    "risk_burst_traffic": " Real bursts reach {burst_peak} ({factor}× the planning peak).",
    "risk_kv": "KV-cache headroom",
    "risk_kv_text": (
        "At the per-instance limit ({conc} requests in flight, {ctx} tokens of mean "
        "context) the KV cache holds {needed} of {capacity} tokens: {headroom} headroom."
    ),
    "risk_kv_short": (
        "At the per-instance limit the KV cache needs {needed} tokens but holds only "
        "{capacity}: requests will queue or be preempted."
    ),
    "risk_kv_burst": " During the burst, KV usage peaked at {kv}.",
    "risk_growth": "Growth beyond the plan",
    "risk_growth_text": (
        "The plan covers ×{growth} growth. At ×{top} the fleet needs {n} instances "
        "({delta:+d}), {cost} per month."
    ),
    "risk_growth_none": ("The plan covers only ×{growth} growth; no larger scenario was planned."),
    # workload
    "workload_heading": "Workload",
    "workload_intro": (
        "{rows} requests over {span} from {files} ({format}); {skipped} rows skipped."
    ),
    "wl_mean_rate": "Mean arrival rate",
    "wl_peak": "Peak rate over {window}",
    "wl_peak_to_mean": "Peak-to-mean (60s)",
    "wl_cv": "Inter-arrival CV",
    "wl_input": "Input tokens mean / p50 / p99",
    "wl_output": "Output tokens mean / p50 / p99",
    "wl_classes": "Short / medium / long requests",
    "wl_prefix": "Ideal prefix-cache hit ratio",
    "wl_sessions": "Sessions / turns per session (mean)",
    "wl_estimated": "Token counts are estimated by a tokenizer, not reported by the server.",
    "wl_observed": "Server-observed {metric} p50 / p95 / p99",
    "wl_metrics": (
        "Read from Prometheus: {engine} metrics of {instances} instance(s) at {step} s steps. "
        "What metrics cannot tell, and the assumption used instead:"
    ),
    "chart_rate": "Arrival rate over time",
    "chart_rate_peak": "planning peak",
    "chart_rate_burst": "burst",
    "chart_hour": "Hour-of-day shape",
    "chart_none": "{title}: not drawn, {reason}.",
    "chart_hour_none": "the log spans {span}, less than a day",
    "chart_hour_clock_none": "the log has no wall-clock times",
    "chart_input": "Input length distribution",
    "chart_output": "Output length distribution",
    "chart_prefix": "Prefix reuse against cache size",
    "chart_prefix_ideal": "ideal (unlimited cache)",
    "chart_prefix_none": "no prefix data in the log",
    "axis_time_h": "time (h)",
    "axis_time_s": "time since run start (s)",
    "axis_hour": "hour of day",
    "axis_rate": "req/s",
    "axis_tokens": "tokens (log)",
    "axis_requests": "requests",
    "axis_cache": "cache size (tokens, log)",
    "axis_hit": "hit ratio",
    # load test
    "loadtest_heading": "Load test and limit",
    "loadtest_intro": (
        "Run {run} against {host} ({model}, {endpoint} endpoint), {stages} stages, "
        "seed {seed}, {workers} Locust workers."
    ),
    "stage_table": "Stages",
    "col_stage": "Stage",
    "col_role": "Role",
    "col_duration": "Duration",
    "col_offered": "Offered",
    "col_achieved": "Achieved",
    "col_ttft_p50": "TTFT p50",
    "col_ttft_p95": "TTFT p95",
    "col_tpot_p95": "TPOT p95",
    "col_errors": "Errors",
    "col_recovery": "Recovery",
    "errors_table": "Errors by class",
    "errors_classes": (
        "refused: HTTP 429 or 503 (the server turned the load away); server_error: other "
        "5xx; client_error: other 4xx; connect, connect_refused: no connection; "
        "disconnect: the connection broke; timeout: no complete answer in time; "
        "stream_error: an error event inside the stream. The message is the most "
        "frequent one of the class."
    ),
    "col_where": "Stage or level",
    "col_class": "Class",
    "col_message": "Message",
    "limit_level": "limit level {load}",
    "role_steady": "steady",
    "role_burst": "burst",
    "role_recovery": "recovery",
    "role_step": "step",
    "role_level": "level",
    "role_replay": "replay",
    "not_recovered": "not recovered",
    "chart_timeline": "Offered and achieved load",
    "legend_offered": "offered",
    "legend_achieved": "achieved",
    "chart_ttft": "TTFT p95, rolling 10 s by send time",
    "chart_errors": "Errors per second",
    "chart_queue": "Server queue (vllm:num_requests_waiting)",
    "chart_kv": "KV-cache usage (vllm:kv_cache_usage_perc)",
    "not_scraped": "not scraped",
    "axis_errors": "errors/s",
    "axis_waiting": "requests",
    "axis_kv": "%",
    "axis_seconds": "s",
    "slo_line": "SLO",
    "chart_limit": "Binding metric against load ({binding})",
    "chart_attainment": "SLO attainment against load",
    "chart_attainment_none": "no load level recorded its attainment",
    "chart_levels_none": "the limit file holds no measured load level",
    "axis_load_rps": "offered load (req/s)",
    "axis_load_users": "concurrent users",
    "axis_attainment": "attainment (%)",
    "legend_pass": "pass",
    "legend_fail": "fail",
    "legend_uncertain": "uncertain",
    "legend_invalid": "invalid",
    "limit_sentence_client": (
        "One instance holds at least {value} at {slo}; the load generator could not offer "
        "{fail} (its schedule lag), so the limit may be higher. {levels} levels searched."
    ),
    "limit_marker": "limit {value}",
    "limit_fail_marker": "fails {value}",
    "limit_sentence": (
        "One instance holds {value} at {slo}; {binding} binds first; {fail} fails. "
        "{levels} levels searched, tolerance {tol}."
    ),
    "limit_sentence_open": (
        "One instance holds {value} at {slo}; no level above it failed within the search."
    ),
    "limit_sentence_fast": (
        "One instance holds {value} at {slo} (90 % interval {low} to {high}), found by the "
        "fast search: the server characterised in closed loop, the limit predicted with a "
        "model of it and corrected by the model's error measured on {chunks} confirmation "
        "chunk(s)."
    ),
    "fast_evidence": (
        "Fast search: {characterise} characterising and {confirm} confirming; the model "
        "alone said {predicted}; its measured bias (measured minus modelled miss share) "
        "{bias}."
    ),
    "limit_gap_wide": (
        " The search stopped before its tolerance: the limit lies between {value} and "
        "{fail} (gap {gap})."
    ),
    "limit_sentence_none": "No level met the SLO {slo}; the lowest level tried failed.",
    "limit_table": "Search levels",
    "observed_heading": "Observed capacity beside the load test",
    "observed_sentence": (
        "In production the instances carried up to {carried} per instance while {checked} "
        "held (the server's own histograms, {window}-minute windows); the load-tested limit "
        "is {limit}."
    ),
    "observed_never": "No window met {checked} in production.",
    "observed_missed": "Production missed the SLO from {missed}.",
    "observed_contradicts": (
        "Production missed the SLO from {missed}, below the measured limit: the limit is "
        "contradicted."
    ),
    "obs_col_instance": "Instance",
    "obs_col_carried": "Carried",
    "obs_col_observed_at": "Observed there",
    "obs_col_missed_from": "Missed from",
    "obs_col_windows": "Windows met / missed",
    "limit_heading": "Per-instance SLO limit",
    "col_load": "Load",
    "col_verdict": "Verdict",
    "col_value": "{binding}",
    "col_requests": "Requests",
    "error_in_flight": "still in flight when the load test stopped (not a failure)",
    "col_completed_scheduled": "Completed / scheduled",
    "requests_in_flight": "{completed} / {requests} ({n} in flight at the window's end)",
    "verdict_pass": "pass",
    "verdict_fail": "fail",
    "verdict_uncertain": "uncertain",
    "verdict_stopped_early": ", stopped early",
    "verdict_invalid": "invalid (client lag)",
    "verdict_unstable": ", unstable",
    "failures_at_limit": "At the limit ({load}) {share} of requests failed ({classes}).",
    "failures_at_fail": "At the first failing level ({load}) {share} failed ({classes}).",
    "no_failures": "none",
    "prediction_sentence": (
        "The engine model, searched in virtual time under the same steady-state rules, "
        "predicts {predicted}; measured {measured} ({gap})."
    ),
    "time_scale_note": (
        "The endpoint ran {scale}x faster than wall time (an emulator); loads and "
        "latencies are in its time."
    ),
    "chart_recovery": "Recovery after the burst",
    "recovery_marker": "recovered after {value}",
    "recovery_none": "no burst and recovery stages in this run",
    "records_none": "{file} is missing or empty: no timeline",
    "saturation": (
        "Highest completion rate at any level: {value} (requests finished per second inside "
        "a level's window, passing or failing; those still in flight at its end are not "
        "counted)."
    ),
    "littles_law": (
        "Little's law at the limit level: {rate} completed × {e2e} mean E2E = {conc} requests "
        "in flight (page 1 and the plan take the limit itself × the E2E)."
    ),
    # plan
    "plan_heading": "Plan",
    "arith_heading": "Instance arithmetic",
    "arith_formula": (
        "instances = ceil(peak × growth × (1 + headroom) / per-instance limit) + spare"
    ),
    "arith_row": "×{growth}: ceil({demand} × {h} / {limit}) + {spare} = "
    "ceil({dwh} / {limit}) + {spare} = {load} + {spare} = {n}",
    "scenario_table": "Growth scenarios",
    "col_growth": "Growth",
    "col_demand": "Demand",
    "col_with_headroom": "With headroom",
    "col_limit": "Limit / instance",
    "col_for_load": "For load",
    "col_spare": "Spare",
    "col_instances": "Instances",
    "col_gpus": "GPUs",
    "col_cost": "Cost / month",
    "sensitivity_heading": "Sensitivity: instances by growth and headroom",
    "sensitivity_corner": "growth \\ headroom",
    "sensitivity_note": "The highlighted cell is the plan.",
    "resources_heading": "Resources",
    "res_gpu_mem": "GPU memory per GPU",
    "res_weights": "Model weights per GPU",
    "res_kv_token": "KV cache per token per GPU",
    "res_kv_capacity": "KV-cache capacity",
    "res_kv_needed": "KV cache needed at the limit",
    "res_kv_headroom": "KV-cache headroom",
    "res_context": "Mean context per request",
    "res_concurrency": "Requests in flight at the limit",
    "res_cpu": "CPU cores per instance / total",
    "res_ram": "Host RAM per instance / total",
    "res_rule": "Rule for CPU and RAM",
    "tokens_unit": "{value} tokens",
    "cost_heading": "Cost",
    "cost_price": "GPU-hour price",
    "cost_hours": "Hours per month",
    "cost_monthly": "Cost per month (plan)",
    "cost_source": "Price source",
    "queue_heading": "Queueing cross-check",
    "checks_heading": "Cross-checks of the plan",
    "queue_text": (
        "An M/G/c queue with the measured arrival CV² {ca2} and service CV² {cs2} needs "
        "{bursty} instances for the load; Poisson arrivals (CV² = 1) would need {poisson}."
    ),
    "queue_wait": " Probability of waiting {pw}, mean wait {wait}.",
    "queue_none": "No queueing cross-check in this plan.",
    "fleet_heading": "Fleet-simulation check",
    "fleet_text": (
        "The profile's arrivals at {rate} (with their bursts) replayed for {sim} of "
        "virtual time against n instances of the engine model."
    ),
    "fleet_verdict": "{routing}: n = {ok} meets the SLO",
    "fleet_verdict_fail": ", n = {fail} does not",
    "fleet_verdict_none": "{routing}: no simulated count meets the SLO",
    "chart_fleet": "Simulated SLO attainment against instances",
    "axis_instances": "instances",
    "routing_round_robin": "round robin",
    "routing_least_outstanding": "least outstanding requests",
    "col_routing": "Routing",
    "col_attainment": "Attainment",
    "col_meets": "Meets SLO",
    "yes": "yes",
    "no": "no",
    "fleet_none": "No fleet simulation in this plan.",
    # method
    "method_heading": "Assumptions and method",
    "method_metrics": "Metric definitions",
    "def_ttft": "TTFT: first chunk with non-empty content minus send time.",
    "def_tpot": "TPOT per request: (E2E - TTFT) / (output tokens - 1), for output tokens > 1.",
    "def_itl": "ITL: every gap between content chunks (pooled).",
    "def_e2e": "E2E: last content chunk minus send time.",
    "def_lag": (
        "Schedule lag: actual send minus intended send (open loop). Latencies are also kept "
        "from the intended send, so a slow client cannot hide queueing."
    ),
    "def_tokens": (
        "Output tokens: the server's usage count; counted chunks otherwise, and the run is "
        "marked estimated."
    ),
    "def_good": (
        "Good request: succeeded and meets every per-request threshold (inclusive). "
        "Goodput = good requests / stage duration. SLO attainment = good / all scheduled "
        "requests of the stage (errors and timeouts count as not good)."
    ),
    "method_steps": "Method",
    "method_profile": (
        "Demand comes from the profile of {rows} logged requests: the planning peak is "
        "{peak_def} = {peak}."
    ),
    "method_limit_given": (
        "The per-instance limit, {limit}, was given to the planner (capplan plan --limit), not "
        "measured by a load test in this report."
    ),
    "method_limit": (
        "The per-instance limit is the highest {dimension} at which one instance met "
        "{slo}: the search bracketed the load exponentially and then narrowed the gap "
        "between the highest passing and the lowest failing level to {tol}."
    ),
    "method_instances": (
        "Instances = ceil(peak × growth × (1 + headroom {headroom}) / limit) + {spare} "
        "spare (N+{spare})."
    ),
    "method_cost": (
        "Cost = instances × {tp} GPU(s) × {price} per GPU-hour × {hours} hours per month."
    ),
    "method_checks": (
        "Two cross-checks: an M/G/c queueing approximation with the measured burstiness, "
        "and a simulation of the fleet in virtual time with the same engine model."
    ),
    "dimension_rate": "arrival rate",
    "dimension_concurrency": "concurrency",
    "warnings_heading": "Caveats",
    "warn_digest": (
        "The plan was made from a profile with another digest than the one given to this report."
    ),
    "warn_estimated": "Output token counts of the run are estimated, not server-reported.",
    "warn_interrupted": "The run was interrupted; its last stage is incomplete.",
    "warn_profile_estimated": "The profile's token counts come from a tokenizer estimate.",
    "warn_none": "None found in the inputs.",
    "warn_plan_note": "Planner's note: {note}",
    "warn_stage": "Load-test stage {stage} did not offer the asked workload: {text}.",
    "warn_stages": "{n} load-test stage warning(s).",
    "warn_plan_notes": "The planner left {n} note(s).",
    # appendix
    "appendix_heading": "Appendix: run metadata and input digests",
    "meta_run": "Run",
    "meta_command": "Command",
    "meta_versions": "capplan / Locust",
    "meta_target": "Target",
    "meta_model": "Model / endpoint",
    "meta_seed": "Seed / workers",
    "meta_time": "Started / ended",
    "meta_plan": "Stage plan",
    "meta_stage": "{name}: {role}, {duration}, {load}",
    "meta_profile_source": "Profile source",
    "meta_profile_rows": "Rows kept / skipped",
    "digest_heading": "Input digests (sha256)",
    "col_role_file": "Input",
    "col_path": "Path",
    "col_sha": "sha256",
    "digest_role_profile": "profile",
    "digest_role_run": "run.json",
    "digest_role_stages": "stages.json",
    "digest_role_records": "records.parquet",
    "digest_role_server_metrics": "server_metrics.parquet",
    "digest_role_limit": "limit.json",
    "digest_role_plan": "plan",
    "digest_role_previous": "previous plan",
    "recorded_digests": "Profile digests recorded by each step",
    "rec_profile": "Profile JSON given to the report",
    "rec_run": "Load-test run",
    "rec_limit": "Limit search",
    "rec_plan": "Plan",
    "match": "matches",
    "mismatch": "differs",
    "unknown": "not recorded",
    "na": "n/a",
    # routers (capplan plan --routing; reports/pages/routing.py)
    "routing_power_of_two": "power of two choices",
    "routing_session_affinity": "session affinity",
    "routing_prefix_aware": "prefix-aware",
    "router_heading": "Instances by router",
    "router_assumed": (
        "The count of {n} assumes {routing} routing; under it the simulated fleet needs {need} "
        "instances to meet the SLO. "
    ),
    "router_other": "{routing} {need}",
    "router_others": "The other routers would need: {others}. ",
    "router_more_than": "more than {n}",
    "router_ideal": (
        "Prefix-hit ratios are counted by the simulated engines' own caches at n = {n}, "
        "against the profile's ideal of {ideal} (every earlier prompt block still cached). "
    ),
    "router_ideal_none": (
        "The profile has no prefix-reuse statistics: there is no ideal hit ratio to compare with. "
    ),
    "router_threshold": (
        "The prefix-aware router sends a request to the instance with the longest matched "
        "prefix when it covers at least {threshold} of the prompt's blocks, else to the "
        "least-loaded one."
    ),
    "col_router_needs": "Fewest instances meeting the SLO",
    "col_prefix_hits": "Prefix-hit ratio at n",
    "col_of_ideal": "Share of ideal",
    # autoscaling (capplan plan --autoscale)
    "autoscale_heading": "Autoscaling against the static plan",
    "autoscale_intro": (
        "Each policy was simulated over {days} days of the profile's traffic,"
        " bursts included, with a cold start of {cold} before a new instance"
        " serves. A request counts as good when it waits at most {budget} for"
        " one of an instance's {slots} request slots; the target is {target}"
        " of requests good."
    ),
    "autoscale_col_policy": "Policy",
    "autoscale_col_worst_hour": "Worst hour",
    "autoscale_col_burst": "Worst minute after a burst",
    "autoscale_col_gpu_h": "GPU-hours / month",
    "autoscale_col_vs_static": "vs static",
    "autoscale_col_mean": "Mean instances",
    "autoscale_col_hour": "Hour (UTC)",
    "autoscale_recommended": "Recommended (*): {policy}.",
    "autoscale_hourly_heading": "Attainment by hour of day",
    "autoscale_manifests": (
        "KEDA ScaledObject and HPA written for {policy}: {query}, target {threshold} per replica."
    ),
    "autoscale_method": "Traffic: {trace}. Model: {model}.",
    "autoscale_label_static": "static",
    "autoscale_label_reactive_queue": "reactive-queue",
    "autoscale_label_reactive_kv": "reactive-kv",
    "autoscale_label_rate": "rate",
    "autoscale_label_schedule": "schedule",
    "digest_role_verify": "verify.json",
}
