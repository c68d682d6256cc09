"""The planner's findings (`contracts.finding.Finding`) worded in a report's language.

English is the text contracts.finding writes (and plan.json / review.json store); Chinese is
worded here from the same key and figures, with the names a finding carries as values
(a trend's model, what dominates an interval) translated too. A stored file from before
findings existed has only its English text: a report shows that text as it is.
"""

from __future__ import annotations

from contracts.finding import Finding, word_finding
from contracts.plan import Plan
from contracts.whatif import Lesson
from reports.i18n.words import Words

FINDINGS_ZH: dict[str, str] = {
    "risk.count_interval": "实例数可能不够：{level:.0%} 区间为 {low}-{high} 个实例"
    "（主要受{dominant}影响）",
    "risk.growth": "日志趋势预计到 {horizon} 增长 x{growth:.2f}，高于假定的 x{assumed:g}",
    "risk.kv_headroom": "在上限处 KV 缓存余量为 {kv:.0%}（{gpu} x {tp}）",
    "risk.fleet_check": "机队模拟：{verdict}",
    "risk.bursts": "10 s 突发达到规划峰值的 {burst:.1f} 倍；余量 {headroom:.0%}",
    "risk.limit_given": "上限 {limit} 为给定值，未经测量",
    "risk.observed_capacity": "生产环境在每实例 {missed:.2f} req/s 时已未达 SLO"
    "（{minutes:g} 分钟窗口），低于负载测试得出的上限 {limit_rps:.2f}",
    "risk.preset": "流量来自预置画像，而非本服务的日志",
    "review.count_method": "规划峰值对窗口速率做移动块自助法（每块约 sqrt(n) 个窗口）；上限在搜索的"
    "最后一次确定通过与第一次失败之间按对数均匀抽取；每一对都按计划的规则计数",
    "review.count_method_predicted": "规划峰值对窗口速率做移动块自助法（每块约 sqrt(n) 个窗口）；"
    "上限为预测值而非实测，在其区间（已发表的服务端结果给出的真实 GPU 上限相对引擎模型的范围）"
    "与搜索区间的并集上按对数均匀抽取；每一对都按计划的规则计数",
    "review.pool_rule": "共享备用：承载负载的 GPU 加上备用最多的那个服务的备用 GPU"
    "（其 k 个备用实例 x TP 个 GPU，而非其 N+k 个），按池内最高的每 GPU 小时价格计价",
    "review.option_peak_all_day": "每小时 {top} 个实例（日志中最高的一小时）",
    "review.option_fixed_schedule": "按一天中的小时，取该类日子中任一天所需的最大值",
    "review.option_fixed_schedule_split": "按一天中的小时，取该类日子中任一天所需的最大值"
    "（工作日与周末分开）",
    "review.option_autoscaled": "每个小时按其自身需求；新实例在需求上升前 {delay_s:g} s 启动"
    "（模型加载时间）",
    "review.trend": "{model}拟合 {weeks} 个每周峰值（R² {r2:.2f}；{other_model} {r2_other:.2f}）："
    "每周 {weekly:+.1%}；到 {horizon}（{ahead:.1f} 周）x{growth:.2f}"
    "（{level:.0%}：x{low:.2f}-x{high:.2f}）",
    "plan.sentence": "规划 {instances} 个 {model} 实例，运行于 {gpu} x {tp}（{gpus} 个 GPU，"
    "每月 ${monthly_usd:,.0f}，每 GPU 小时 ${price:g}），应对 {peak_rps:.3g} req/s 的峰值"
    "（{peak_definition}）x {growth:g} 增长，余量 {headroom:.0%}，冗余 N+{redundancy}。",
    "plan.host_rule": "CPU 核数 = {cores_base} + {cores_per_gpu} x 每实例 GPU 数；主机内存 = "
    "{ram_base:g} GiB + {ram_per_memory:g} x 实例的 GPU 显存（按 NVIDIA DGX H100 的比例：每 GPU "
    "14 核、2 倍显存）",
    "note.e2e_simulated": "上限处的 e2e（{e2e_s:.2f} s）由模拟得出：引擎模型的单个 {gpu} 实例运行于"
    "上限，未经测量",
    "note.kv_short": "KV 缓存可容纳 {capacity:,} 个 token，而上限的并发需要 {needed:,.0f} 个："
    "请求将排队或被抢占；请提高 --tp 或选用更大的 GPU",
    "note.limit_unconfirmed": "单实例上限（{limit}）未经确认：测得它的搜索在确认"
    "结果之前就停止了；请用 capplan 完成这次搜索后重新规划",
    "note.kv_short_simulated": "引擎模型在给定上限（{limit_rps:.3g} req/s）下会排队："
    "其模拟的 E2E 为 {e2e_s:.1f} s，由此推出的并发所需 KV（{needed:,.0f} 个 token）"
    "超过缓存容量（{capacity:,}）；"
    "模型对这块 GPU 的预期低于该上限，请核对上限，"
    "或用测得该上限的运行校准模型（capplan calibrate）",
    "note.observed_contradicts": "生产与上限矛盾：有实例在 {missed:.2f} req/s 时已未达 SLO"
    "（服务器直方图的 {minutes:g} 分钟窗口），低于压测上限 {limit_rps:.2f} req/s",
    "note.fleet_no_slo": "已跳过机队检查：没有 SLO（请给出 --slo 或 limit.json）",
    "note.fleet_slo_metrics": "已跳过机队检查：SLO 中的 {missing} 机队模拟器不产生（它给出 "
    "{simulated}）",
    "note.calibrated": "引擎模型已按 {levels} 个实测负载级别校准：mfu {mfu:.3g}，mbu {mbu:.3g}，"
    "每步开销 {overhead_ms:.3g} ms；平均相对误差 {mean_err:.1%}（最大 {max_err:.1%}；未校准 "
    "{default_err:.1%}），指标 {metrics}",
    "note.calibrated_reproduces": "引擎模型已按 {levels} 个实测负载级别校准：mfu {mfu:.3g}，mbu "
    "{mbu:.3g}，每步开销 {overhead_ms:.3g} ms；平均相对误差 {mean_err:.1%}（最大 {max_err:.1%}；"
    "未校准 {default_err:.1%}），指标 {metrics}；模拟的实例重现了实测上限",
    "note.calibrated_misses": "引擎模型已按 {levels} 个实测负载级别校准：mfu {mfu:.3g}，mbu "
    "{mbu:.3g}，每步开销 {overhead_ms:.3g} ms；平均相对误差 {mean_err:.1%}（最大 {max_err:.1%}；"
    "未校准 {default_err:.1%}），指标 {metrics}；模拟的实例未能重现实测上限",
    "note.no_calibration": "未校准：limit.json 的负载级别没有延迟指标",
    "figure.none": "-",
    "figure.prefix": "画像中 {ideal:.0%} 的提示 token 位于共享块中",
    "figure.prefix_replayed": "画像中 {ideal:.0%} 的提示 token 位于共享块中（回放流量中为 "
    "{replayed:.0%}）",
    "figure.prefix_none": "画像没有前缀统计",
    "figure.prefix_none_replayed": "画像没有前缀统计（回放流量中为 {replayed:.0%}）",
    "figure.kv_dtype": "KV 缓存用 {dtype} 可容纳 {alt_tokens:,} 个 token，原为 {base_tokens:,} 个",
    "figure.quantization": "{fmt} 权重每个 GPU 占 {alt_gb:.1f} GB，{base_fmt} 为 {base_gb:.1f} GB；"
    "KV 缓存可容纳 {alt_tokens:,} 个 token，原为 {base_tokens:,} 个",
    "figure.kv_dtype_need": "在 {dtype} 的上限处，进行中的请求需要 {need:,.0f} 个 token"
    "（占其缓存的 {share:.0%}）",
    "figure.reservation": "static 为每个序列预留 {max_len:,} 个 token：最多容纳 {seqs:,} 个序列，"
    "而进行中的请求平均占用 {ctx:,.0f} 个 token",
    "figure.reservation_running": "static 为每个序列预留 {max_len:,} 个 token：最多容纳 {seqs:,} "
    "个序列，而进行中的请求平均占用 {ctx:,.0f} 个 token，paged 在其上限处运行 {running:.1f} 个",
    "figure.no_common_load": "没有可比较的共同负载",
    "figure.queue": "在 {rate:.3g} req/s 下，短提示（<= {short_max} token）的 P99 TTFT "
    "{base_short} -> {alt_short}，长提示（>= {long_min}）{base_long} -> {alt_long}",
    "figure.spec": "每个解码步 {gain:.2f} 个 token（{positions} 个验证位置、{drafts} 次草稿推理）",
    "figure.spec_running": "上限处有 {running:.0f} 个进行中的请求",
    "figure.seqs": "基线上限处有 {running:.1f} 个进行中的请求",
    "figure.budget": "平均提示 {mean_in:,.0f} 个 token，对比每步 token 预算",
    "figure.memory": "KV 缓存 {base:,} -> {alt:,} 个 token",
    "figure.disagg_transfer": "平均提示（{mean_in:,.0f} 个 token，输出 {mean_out:,.0f} 个）"
    "在 {ms:.2f} ms 内传输 {mb:,.1f} MB 的 KV",
    "figure.disagg_no_transfer": "无 KV 传输",
    "figure.disagg_at": "在各自上限处 TTFT p95 {base_ttft}、TPOT p95 {base_tpot} -> TTFT p95 "
    "{alt_ttft}、TPOT p95 {alt_tpot}",
    "figure.engine_none": "{engine}：无配置",
    "figure.engine_paged": "{engine} 随 token 到达分页保存 KV（重算抢占），{kv:,} 个 KV token，"
    "每请求每步 CPU {us:.0f} us",
    "figure.engine_request": "{engine} 在准入时预留提示与输出的 KV（无抢占），{kv:,} 个 KV token，"
    "每请求每步 CPU {us:.0f} us",
    "figure.engine_static": "{engine} 为每个序列预留 {max_len:,} 个 token，{kv:,} 个 KV token，"
    "每请求每步 CPU {us:.0f} us",
    "figure.engine_paged_prefill_first": "{engine} 随 token 到达分页保存 KV（重算抢占），{kv:,} 个 "
    "KV token，每请求每步 CPU {us:.0f} us，预填充单独进行",
    "figure.engine_request_prefill_first": "{engine} 在准入时预留提示与输出的 KV（无抢占），{kv:,} "
    "个 KV token，每请求每步 CPU {us:.0f} us，预填充单独进行",
    "figure.engine_static_prefill_first": "{engine} 为每个序列预留 {max_len:,} 个 token，{kv:,} 个 "
    "KV token，每请求每步 CPU {us:.0f} us，预填充单独进行",
    "figure.engine_reserve": "{engine} 仅当请求的提示与输出装得下空闲 KV 减去运行中请求待生成 "
    "token 的一部分时才准入",
    "figure.engine_context": "每个请求平均占用 {ctx:,.0f} 个 token",
    "fleet.slo_metrics": "SLO 中的 {missing} 机队模拟器不产生（它给出 {simulated}）",
    "fleet.not_simulated": "机队模拟：n={instances} 未被模拟",
    "fleet.short": "机队模拟：n={instances} 在模拟中未达到 SLO：请规划更多实例",
    "fleet.short_needs": "机队模拟：n={instances} 在模拟中未达到 SLO：请规划更多实例；模拟需要 "
    "n={needed}",
    "fleet.short_routing": "机队模拟：n={instances} 在模拟中未达到 SLO（仅在 {routings} 路由下"
    "达到）：请规划更多实例",
    "fleet.short_routing_needs": "机队模拟：n={instances} 在模拟中未达到 SLO（仅在 {routings} "
    "路由下达到）：请规划更多实例；模拟需要 n={needed}",
    "fleet.meets": "机队模拟：n={instances} 在模拟中达到 SLO",
    "fleet.meets_with_spare": "机队模拟：n={instances} 达到 SLO，n-1={below} 也达到：余量与冗余是"
    "高于模拟需求的缓冲",
    "fleet.meets_tight": "机队模拟：n={instances} 达到 SLO，n-1={below} 未达到",
    # the fleet measured behind a load balancer (planner.verify)
    "verify.holds": "计划 {planned} 个实例中的 n={serving} 个在设计峰值 {rate:.3g} req/s 下达到 "
    "SLO {slo}（达标率 {attainment:.1%}；计划模拟 {sim_attainment:.1%}），并在 {burst_s:g} "
    "秒突发后 {recovery:.0f} 秒恢复",
    "verify.fails_peak": "计划 {planned} 个实例中的 n={serving} 个在设计峰值 {rate:.3g} req/s "
    "下未达到 SLO {slo}（达标率 {attainment:.1%}；计划模拟 {sim_attainment:.1%}）",
    "verify.no_window": "计划 {planned} 个实例中的 n={serving} 个在设计峰值 {rate:.3g} req/s "
    "下未进入稳态窗口：稳态规则要求的预热（{warmup_s:.0f} 秒）占满了整个 {duration_s:.0f} 秒的阶段"
    "（队列未稳定），因此没有请求按 SLO {slo} 判定",
    "verify.fails_recovery": "计划 {planned} 个实例中的 n={serving} 个在设计峰值 {rate:.3g} "
    "req/s 下达到 SLO {slo}，但未能从 {burst_s:g} 秒突发中恢复",
    "verify.invalid": "对计划 {planned} 个实例中 n={serving} 个在 {rate:.3g} req/s 下的测试无效："
    "{reason}",
}

# Names a finding carries as values, worded in Chinese (value name -> value -> words).
VALUES_ZH: dict[str, dict[str, str]] = {
    "dominant": {"peak": "峰值", "limit": "上限", "none": "两者均非"},
    "model": {"linear": "线性", "exponential": "指数"},
    "other_model": {"linear": "线性", "exponential": "指数"},
}


def finding_text(words: Words, finding: Finding | None, english: str) -> str:
    """`finding` in the report's language; `english` (the stored text) when there is none."""
    if finding is None or words.lang == "en":
        return english
    values = {
        name: VALUES_ZH.get(name, {}).get(value, value) if isinstance(value, str) else value
        for name, value in finding.values.items()
    }
    return word_finding(FINDINGS_ZH, finding.model_copy(update={"values": values}))


def plan_sentence(words: Words, plan: Plan) -> str:
    """The plan's sentence with the fleet simulation's verdict, in the report's language."""
    sentence, fleet = plan.sentence_finding, plan.checks.fleet
    if sentence is None or words.lang == "en":
        return plan.sentence
    inputs = plan.inputs
    given = inputs.peak_rps_given is not None or inputs.peak_users_given is not None
    peak = (
        words.t("peak_def_given")
        if given
        else words.t(
            "peak_def_quantile", q=f"{inputs.peak_quantile * 100:g}", window=inputs.peak_window
        )
    )
    sentence = sentence.model_copy(update={"values": {**sentence.values, "peak_definition": peak}})
    out = finding_text(words, sentence, plan.sentence)
    verdict = fleet.verdict_finding if fleet is not None else None
    return out + (finding_text(words, verdict, "") + "。" if verdict is not None else "")


def lesson_figure(words: Words, lesson: Lesson) -> str:
    """The figure that explains a what-if lesson, in the report's language."""
    if words.lang == "en" or not lesson.figure_findings:
        return lesson.figure
    return "；".join(finding_text(words, f, "") for f in lesson.figure_findings)
