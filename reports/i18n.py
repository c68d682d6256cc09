"""The report's words in English and Chinese, its fonts per language, and number formatting.

Every label, heading and sentence of the PDF comes from STRINGS; English and Chinese hold the
same keys (a test checks it). Chinese text is set in the font `reports.fonts` chooses (an
embedded CJK TrueType subset, or the built-in STSong-Light); Latin runs inside it stay in
Helvetica. Units (req/s, s, ms, GiB, $) and metric names (TTFT,
TPOT, p95, KV) stay as they are in both languages.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from contracts.errors import InputError
from reports.fonts import BUILTIN_CJK_FONT, builtin_cjk_font, is_cjk_font

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")

LATIN_FONT = "Helvetica"

# Runs of these characters are set in Helvetica inside Chinese text: STSong-Light's own Latin
# glyphs are full-width-ish and read poorly in numbers and metric names, and one Latin font
# keeps numbers alike whichever CJK font sets the rest.
_LATIN_RUN = re.compile(r"[\x20-\x7e×·–²%]+")


def split_runs(text: str) -> list[tuple[str, bool]]:
    """Split text into (run, is_latin) pieces, in order."""
    runs: list[tuple[str, bool]] = []
    pos = 0
    for m in _LATIN_RUN.finditer(text):
        if m.start() > pos:
            runs.append((text[pos : m.start()], False))
        runs.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        runs.append((text[pos:], False))
    return runs


STRINGS: dict[str, dict[str, str]] = {
    "en": {
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
        "risk_growth_none": (
            "The plan covers only ×{growth} growth; no larger scenario was planned."
        ),
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
        "chart_rate": "Arrival rate over time",
        "chart_rate_peak": "planning peak",
        "chart_rate_burst": "burst",
        "chart_hour": "Hour-of-day shape",
        "chart_hour_none": "the log spans less than a day",
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
        "axis_load_rps": "offered load (req/s)",
        "axis_load_users": "concurrent users",
        "axis_attainment": "attainment",
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
        "limit_gap_wide": (
            " The search stopped before its tolerance: the limit lies between {value} and "
            "{fail} (gap {gap})."
        ),
        "limit_sentence_none": "No level met the SLO {slo}; the lowest level tried failed.",
        "limit_table": "Search levels",
        "limit_heading": "Per-instance SLO limit",
        "col_load": "Load",
        "col_verdict": "Verdict",
        "col_value": "{binding}",
        "col_requests": "Requests",
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
        "saturation": "Saturation throughput: {value}.",
        "littles_law": (
            "Little's law at the limit: {rate} × {e2e} mean E2E = {conc} requests in flight."
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
            "The plan was made from a profile with another digest than the one given to this "
            "report."
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
    },
    "zh": {
        "doc_title": "容量基线:{name}",
        "subtitle": "{model} 运行于 {gpu}(TP {tp})· SLO {slo} · 生成于 {date}",
        "footer": "capplan 容量基线 · {name} · 生成于 {date}",
        "page_of": "第 {n} 页,共 {total} 页",
        "answer_heading": "结论",
        "answer_rate": (
            "以 {n} 台 {gpu}({load} 台承载负载 + {spare} 台备用)承载 {peak} 的峰值"
            "({peak_def}),满足 {slo},每月约 {cost}。"
        ),
        "answer_users": (
            "以 {n} 台 {gpu}({load} 台承载负载 + {spare} 台备用)承载 {peak} 个并发用户的峰值"
            "({peak_def}),满足 {slo},每月约 {cost}。"
        ),
        "peak_def_quantile": "{window} 窗口速率的 p{q}",
        "peak_def_given": "由规划者直接给定的峰值",
        "key_figures": "关键数字",
        "fig_peak": "规划峰值需求",
        "fig_limit": "单实例 SLO 上限",
        "fig_limit_value": "{value}({binding} 最先触限;{fail} 不达标)",
        "fig_limit_value_short": "{value}({binding} 最先触限)",
        "fleet_warning": "注意:集群仿真中 {n} 台实例不满足 SLO;见集群仿真验证。",
        "fig_instances": "实例数",
        "fig_instances_value": "{n}({load} 台承载负载 + {spare} 台备用)",
        "fig_gpus": "GPU 数",
        "fig_cost": "每月成本",
        "fig_growth": "增长情景",
        "fig_growth_value": "×{growth}:{n} 台实例,{cost}",
        "compare_heading": "与上一期基线对比",
        "compare_previous": "上一期({name})",
        "compare_this": "本期规划",
        "compare_change": "变化",
        "compare_demand": "峰值需求",
        "compare_limit": "单实例上限",
        "compare_instances": "实例数",
        "compare_gpus": "GPU 数",
        "compare_cost": "每月成本",
        "risks_heading": "三大风险",
        "risk_high": "高",
        "risk_medium": "关注",
        "risk_low": "低",
        "risk_burst": "突发后的恢复",
        "risk_burst_recovered": (
            "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)之后,TTFT p95 用了 {recovery} "
            "恢复正常;突发期间 TTFT p95 达到 {burst_p95}。"
        ),
        "risk_burst_not_recovered": (
            "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)之后,直到测试结束 TTFT p95 "
            "仍未恢复正常;突发期间达到 {burst_p95}。"
        ),
        "risk_burst_nothing_completed": (
            "突发负载 {burst}(稳态负载的 {burst_ratio} 倍)期间没有任何请求成功完成。"
        ),
        "risk_burst_recovered_after": "突发结束 {recovery} 后 TTFT p95 恢复正常。",
        "risk_burst_unmeasured": "未测量突发恢复阶段;规划中的突发尚未经过测试。",
        "risk_burst_traffic": "真实流量的突发可达 {burst_peak}(规划峰值的 {factor} 倍)。",
        "risk_kv": "KV 缓存余量",
        "risk_kv_text": (
            "在单实例上限处(并发 {conc} 个请求,平均上下文 {ctx} 个 token),KV 缓存占用 "
            "{needed} / {capacity} 个 token:余量 {headroom}。"
        ),
        "risk_kv_short": (
            "在单实例上限处 KV 缓存需要 {needed} 个 token,但只能容纳 {capacity} 个:请求将排队"
            "或被抢占。"
        ),
        "risk_kv_burst": "突发期间 KV 使用率最高达 {kv}。",
        "risk_growth": "超出规划的增长",
        "risk_growth_text": (
            "本规划覆盖 ×{growth} 的增长。若增长到 ×{top},需要 {n} 台实例({delta:+d}),每月 {cost}。"
        ),
        "risk_growth_none": "本规划只覆盖 ×{growth} 的增长;未规划更大的情景。",
        "workload_heading": "负载画像",
        "workload_intro": (
            "来自 {files}({format})的 {rows} 个请求,时间跨度 {span};跳过 {skipped} 行。"
        ),
        "wl_mean_rate": "平均到达率",
        "wl_peak": "{window} 窗口峰值速率",
        "wl_peak_to_mean": "峰均比(60s)",
        "wl_cv": "到达间隔变异系数",
        "wl_input": "输入 token 均值 / p50 / p99",
        "wl_output": "输出 token 均值 / p50 / p99",
        "wl_classes": "短 / 中 / 长请求占比",
        "wl_prefix": "理想前缀缓存命中率",
        "wl_sessions": "会话数 / 每会话轮数(均值)",
        "wl_estimated": "token 数由分词器估算,并非服务端上报。",
        "chart_rate": "到达率随时间变化",
        "chart_rate_peak": "规划峰值",
        "chart_rate_burst": "突发",
        "chart_hour": "按小时的日内分布",
        "chart_hour_none": "日志时间跨度不足一天",
        "chart_input": "输入长度分布",
        "chart_output": "输出长度分布",
        "chart_prefix": "前缀复用率与缓存容量",
        "chart_prefix_ideal": "理想值(缓存无限)",
        "chart_prefix_none": "日志中没有前缀数据",
        "axis_time_h": "时间 (h)",
        "axis_time_s": "自测试开始的时间 (s)",
        "axis_hour": "小时",
        "axis_rate": "req/s",
        "axis_tokens": "token 数(对数)",
        "axis_requests": "请求数",
        "axis_cache": "缓存容量(token,对数)",
        "axis_hit": "命中率",
        "loadtest_heading": "压测与上限",
        "loadtest_intro": (
            "压测 {run},目标 {host}({model},{endpoint} 接口),共 {stages} 个阶段,随机种子 "
            "{seed},{workers} 个 Locust 工作进程。"
        ),
        "stage_table": "各阶段",
        "col_stage": "阶段",
        "col_role": "类型",
        "col_duration": "时长",
        "col_offered": "施加负载",
        "col_achieved": "完成负载",
        "col_ttft_p50": "TTFT p50",
        "col_ttft_p95": "TTFT p95",
        "col_tpot_p95": "TPOT p95",
        "col_errors": "错误数",
        "col_recovery": "恢复时间",
        "errors_table": "按类别的错误",
        "errors_classes": (
            "refused：HTTP 状态码 429 或 503（服务端拒绝负载）；server_error：其他 500–599；"
            "client_error：其他 400–499；connect、connect_refused：未能建立连接；"
            "disconnect：连接中断；timeout：未按时得到完整回答；"
            "stream_error：流中的错误事件。消息为该类别中最常见的一条。"
        ),
        "col_where": "阶段或档位",
        "col_class": "类别",
        "col_message": "消息",
        "limit_level": "极限搜索档位 {load}",
        "role_steady": "稳态",
        "role_burst": "突发",
        "role_recovery": "恢复",
        "role_step": "阶梯",
        "role_level": "搜索档位",
        "role_replay": "回放",
        "not_recovered": "未恢复",
        "chart_timeline": "施加负载与完成负载",
        "legend_offered": "施加",
        "legend_achieved": "完成",
        "chart_ttft": "TTFT p95(按发送时间滚动 10 s)",
        "chart_errors": "每秒错误数",
        "chart_queue": "服务端排队(vllm:num_requests_waiting)",
        "chart_kv": "KV 缓存使用率(vllm:kv_cache_usage_perc)",
        "not_scraped": "未采集",
        "axis_errors": "错误/s",
        "axis_waiting": "请求数",
        "axis_kv": "%",
        "axis_seconds": "s",
        "slo_line": "SLO",
        "chart_limit": "触限指标与负载({binding})",
        "chart_attainment": "SLO 达成率与负载",
        "axis_load_rps": "施加负载 (req/s)",
        "axis_load_users": "并发用户数",
        "axis_attainment": "达成率",
        "legend_pass": "达标",
        "legend_fail": "不达标",
        "legend_uncertain": "不确定",
        "legend_invalid": "无效",
        "limit_sentence_client": (
            "单实例在满足 {slo} 时至少可承载 {value};压测客户端无法施加 {fail}"
            "(调度滞后),上限可能更高。共搜索 {levels} 个档位。"
        ),
        "limit_marker": "上限 {value}",
        "limit_fail_marker": "不达标 {value}",
        "limit_sentence": (
            "单实例在满足 {slo} 时可承载 {value};{binding} 最先触限;{fail} 不达标。"
            "共搜索 {levels} 个档位,容差 {tol}。"
        ),
        "limit_sentence_open": "单实例在满足 {slo} 时可承载 {value};搜索范围内更高的档位均未失败。",
        "limit_gap_wide": "搜索在达到容差前停止:上限介于 {value} 与 {fail} 之间(差距 {gap})。",
        "limit_sentence_none": "没有任何档位满足 SLO {slo};尝试的最低档位已不达标。",
        "limit_table": "搜索档位",
        "limit_heading": "单实例 SLO 上限",
        "col_load": "负载",
        "col_verdict": "判定",
        "col_value": "{binding}",
        "col_requests": "请求数",
        "verdict_pass": "达标",
        "verdict_fail": "不达标",
        "verdict_uncertain": "不确定",
        "verdict_stopped_early": ",提前终止",
        "verdict_invalid": "无效(客户端滞后)",
        "verdict_unstable": ",未稳定",
        "failures_at_limit": "在上限 {load} 处有 {share} 的请求失败({classes})。",
        "failures_at_fail": "在首个不达标档位 {load} 处有 {share} 的请求失败({classes})。",
        "no_failures": "无",
        "prediction_sentence": (
            "引擎模型在虚拟时间中按相同的稳态规则搜索,预测上限为 {predicted};实测 {measured}"
            "({gap})。"
        ),
        "time_scale_note": (
            "被测端点运行速度为实际时间的 {scale} 倍(仿真器);负载与延迟均按其时间计。"
        ),
        "chart_recovery": "突发后的恢复",
        "recovery_marker": "{value} 后恢复",
        "recovery_none": "本次压测没有突发与恢复阶段",
        "records_none": "{file} 缺失或为空:无时间线",
        "saturation": "饱和吞吐量:{value}。",
        "littles_law": "上限处的利特尔法则:{rate} × 平均 E2E {e2e} = 并发 {conc} 个请求。",
        "plan_heading": "容量规划",
        "arith_heading": "实例数计算",
        "arith_formula": "实例数 = 向上取整(峰值 × 增长 × (1 + 余量) / 单实例上限) + 备用",
        "arith_row": "×{growth}:向上取整({demand} × {h} / {limit}) + {spare} = "
        "向上取整({dwh} / {limit}) + {spare} = {load} + {spare} = {n}",
        "scenario_table": "增长情景",
        "col_growth": "增长",
        "col_demand": "需求",
        "col_with_headroom": "含余量",
        "col_limit": "单实例上限",
        "col_for_load": "承载负载",
        "col_spare": "备用",
        "col_instances": "实例数",
        "col_gpus": "GPU 数",
        "col_cost": "每月成本",
        "sensitivity_heading": "敏感性:不同增长与余量下的实例数",
        "sensitivity_corner": "增长 \\ 余量",
        "sensitivity_note": "高亮单元格即本规划。",
        "resources_heading": "资源",
        "res_gpu_mem": "每 GPU 显存",
        "res_weights": "每 GPU 模型权重",
        "res_kv_token": "每 GPU 每 token 的 KV 缓存",
        "res_kv_capacity": "KV 缓存容量",
        "res_kv_needed": "上限处所需 KV 缓存",
        "res_kv_headroom": "KV 缓存余量",
        "res_context": "每请求平均上下文",
        "res_concurrency": "上限处的并发请求数",
        "res_cpu": "每实例 / 总 CPU 核数",
        "res_ram": "每实例 / 总主机内存",
        "res_rule": "CPU 与内存的配置规则",
        "tokens_unit": "{value} 个 token",
        "cost_heading": "成本",
        "cost_price": "每 GPU 小时价格",
        "cost_hours": "每月小时数",
        "cost_monthly": "每月成本(本规划)",
        "cost_source": "价格来源",
        "queue_heading": "排队论交叉验证",
        "checks_heading": "规划的交叉验证",
        "queue_text": (
            "按 M/G/c 排队模型,以实测到达 CV² {ca2} 和服务 CV² {cs2} 计算,承载负载需要 "
            "{bursty} 台实例;若到达为泊松过程(CV² = 1)则需要 {poisson} 台。"
        ),
        "queue_wait": "排队概率 {pw},平均等待 {wait}。",
        "queue_none": "本规划没有排队论交叉验证。",
        "fleet_heading": "集群仿真验证",
        "fleet_text": (
            "以 {rate} 回放画像中的到达过程(含突发),在 {sim} 的虚拟时间内驱动 n 个引擎模型实例。"
        ),
        "fleet_verdict": "{routing}:n = {ok} 满足 SLO",
        "fleet_verdict_fail": ",n = {fail} 不满足",
        "fleet_verdict_none": "{routing}:仿真的实例数均不满足 SLO",
        "chart_fleet": "仿真 SLO 达成率与实例数",
        "axis_instances": "实例数",
        "routing_round_robin": "轮询",
        "routing_least_outstanding": "最少未完成请求",
        "col_routing": "路由",
        "col_attainment": "达成率",
        "col_meets": "满足 SLO",
        "yes": "是",
        "no": "否",
        "fleet_none": "本规划没有集群仿真。",
        "method_heading": "假设与方法",
        "method_metrics": "指标定义",
        "def_ttft": "TTFT:首个非空内容块的到达时间减去发送时间。",
        "def_tpot": "TPOT(每请求):(E2E - TTFT) / (输出 token 数 - 1),仅当输出 token 数 > 1。",
        "def_itl": "ITL:相邻内容块之间的每个间隔(合并统计)。",
        "def_e2e": "E2E:最后一个内容块的到达时间减去发送时间。",
        "def_lag": (
            "调度延迟:实际发送时间减去计划发送时间(开环)。延迟同时以计划发送时间为起点记录,"
            "因此客户端变慢也无法掩盖排队。"
        ),
        "def_tokens": "输出 token 数:取服务端 usage 统计;否则按内容块计数,并将该次压测标记为估算。",
        "def_good": (
            "合格请求:成功且满足每一项单请求阈值(含等号)。有效吞吐 = 合格请求数 / 阶段时长。"
            "SLO 达成率 = 合格请求数 / 阶段内计划发送的全部请求数(错误与超时计为不合格)。"
        ),
        "method_steps": "方法",
        "method_profile": "需求来自 {rows} 条请求日志的画像:规划峰值为 {peak_def} = {peak}。",
        "method_limit": (
            "单实例上限是单个实例满足 {slo} 时的最高{dimension}:搜索先按指数扩大负载找到失败"
            "档位,再把最高达标档位与最低不达标档位之间的差距缩小到 {tol}。"
        ),
        "method_instances": (
            "实例数 = 向上取整(峰值 × 增长 × (1 + 余量 {headroom}) / 上限) + {spare} 台备用"
            "(N+{spare})。"
        ),
        "method_cost": "成本 = 实例数 × {tp} 块 GPU × 每 GPU 小时 {price} × 每月 {hours} 小时。",
        "method_checks": (
            "两项交叉验证:按实测突发程度的 M/G/c 排队近似,以及用同一引擎模型在虚拟时间中"
            "仿真整个集群。"
        ),
        "dimension_rate": "到达率",
        "dimension_concurrency": "并发数",
        "warnings_heading": "注意事项",
        "warn_digest": "本规划所用画像的摘要与本报告给定画像的摘要不同。",
        "warn_estimated": "本次压测的输出 token 数为估算值,并非服务端上报。",
        "warn_interrupted": "压测被中断;最后一个阶段不完整。",
        "warn_profile_estimated": "画像中的 token 数来自分词器估算。",
        "warn_none": "输入中未发现需要注意的问题。",
        "warn_plan_note": "规划器附注:{note}",
        "warn_stage": "压测阶段 {stage} 未施加所要求的负载:{text}。",
        "warn_stages": "压测阶段有 {n} 条负载有效性警告(英文原文见英文版报告)。",
        "warn_plan_notes": "规划器留有 {n} 条附注(英文原文见英文版报告)。",
        "appendix_heading": "附录:压测元数据与输入摘要",
        "meta_run": "压测",
        "meta_command": "命令",
        "meta_versions": "capplan / Locust 版本",
        "meta_target": "目标",
        "meta_model": "模型 / 接口",
        "meta_seed": "随机种子 / 工作进程",
        "meta_time": "开始 / 结束",
        "meta_plan": "阶段计划",
        "meta_stage": "{name}:{role},{duration},{load}",
        "meta_profile_source": "画像来源",
        "meta_profile_rows": "保留 / 跳过行数",
        "digest_heading": "输入文件摘要 (sha256)",
        "col_role_file": "输入",
        "col_path": "路径",
        "col_sha": "sha256",
        "digest_role_profile": "画像",
        "digest_role_run": "压测信息",
        "digest_role_stages": "阶段汇总",
        "digest_role_records": "请求记录",
        "digest_role_server_metrics": "服务端指标",
        "digest_role_limit": "上限结果",
        "digest_role_plan": "规划",
        "digest_role_previous": "上一期规划",
        "recorded_digests": "各步骤记录的画像摘要",
        "rec_profile": "提供给报告的画像",
        "rec_run": "压测",
        "rec_limit": "上限搜索",
        "rec_plan": "规划",
        "match": "一致",
        "mismatch": "不一致",
        "unknown": "未记录",
        "na": "无",
    },
}


@dataclass(frozen=True)
class Words:
    """The strings, fonts and number formats of one language.

    `cjk_font` is the registered name of the font for Chinese text (`reports.fonts`); it has
    no bold face, so Chinese headings are set in it too. Documents get theirs from
    `reports.words_for`, which finds the embedded font; `Words("zh")` alone means STSong-Light.
    """

    lang: Lang
    cjk_font: str = BUILTIN_CJK_FONT

    def __post_init__(self) -> None:
        if self.lang not in LANGS:
            raise InputError(f"unknown language {self.lang!r}; expected one of {', '.join(LANGS)}")
        if not is_cjk_font(self.cjk_font):
            raise InputError(f"{self.cjk_font!r} is not a font chosen by reports.fonts")
        if self.lang == "zh" and self.cjk_font == BUILTIN_CJK_FONT:
            builtin_cjk_font()

    @property
    def font(self) -> str:
        return self.cjk_font if self.lang == "zh" else "Helvetica"

    @property
    def bold(self) -> str:
        return self.cjk_font if self.lang == "zh" else "Helvetica-Bold"

    @property
    def mono(self) -> str:
        return "Courier"

    def t(self, key: str, **values: object) -> str:
        """The string for key in this language, with {placeholders} filled."""
        return STRINGS[self.lang][key].format(**values)

    # number formats (same in both languages: units and digits are not translated)
    @staticmethod
    def num(value: float | None, digits: int = 3) -> str:
        if value is not None and value == math.inf:
            return "inf"  # a percentile reached by failed requests
        if value is None or not math.isfinite(value):
            return "–"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"

    def rate(self, value: float | None) -> str:
        """An arrival rate in req/s."""
        return "–" if value is None else f"{self.num(value)} req/s"

    def load(self, value: float | None, unit: str) -> str:
        """A load in the limit's unit: req/s, or a user count."""
        if value is None:
            return "–"
        if unit == "rps":
            return self.rate(value)
        return f"{self.num(value)} {'个并发用户' if self.lang == 'zh' else 'users'}"

    @staticmethod
    def seconds(value: float | None) -> str:
        if value is not None and value == math.inf:
            return "inf"  # a percentile reached by failed requests
        if value is None or not math.isfinite(value):
            return "–"
        if abs(value) < 1.0:
            return f"{value * 1000:.0f} ms"
        return f"{value:.3g} s"

    @staticmethod
    def pct(value: float | None, digits: int = 1) -> str:
        if value is not None and value == math.inf:
            return "inf"  # a percentile reached by failed requests
        if value is None or not math.isfinite(value):
            return "–"
        return f"{value * 100:.{digits}f} %"

    @staticmethod
    def usd(value: float | None) -> str:
        if value is not None and value == math.inf:
            return "inf"  # a percentile reached by failed requests
        if value is None or not math.isfinite(value):
            return "–"
        return f"${value:,.0f}" if abs(value) >= 100 or value == 0 else f"${value:,.2f}"

    @staticmethod
    def integer(value: float | None) -> str:
        return "–" if value is None else f"{value:,.0f}"

    @staticmethod
    def gib(value_bytes: float) -> str:
        return f"{value_bytes / 1024**3:.1f} GiB"

    def duration(self, value_s: float) -> str:
        if value_s >= 2 * 86400:
            return f"{value_s / 86400:.1f} d"
        if value_s >= 2 * 3600:
            return f"{value_s / 3600:.1f} h"
        if value_s >= 120:
            return f"{value_s / 60:.0f} min"
        return f"{value_s:.0f} s"
