"""The fleet-verification page's words (reports.pages.verify), in English and Chinese.
Merged into STRINGS (reports.i18n.strings)."""

from __future__ import annotations

VERIFY_EN: dict[str, str] = {
    "verify_answer_yes": "Verified on the fleet on {date}: n={n} held the SLO at the design peak.",
    "verify_answer_failed": "Not verified: on {date} n={n} did not hold the SLO on the fleet.",
    "verify_answer_no": "Not verified on the fleet (no capplan verify run given).",
    "verify_heading": "Fleet verification",
    "verify_intro": (
        "The plan's design peak ({rate}) sent through the fleet's load balancer, then a burst "
        "and a recovery, judged by {slo} with the limit search's steady-state rules; beside it "
        "the engine model's simulation of the same stages at the same instance count."
    ),
    "verify_compare_heading": "Planned (simulated) against measured, at the peak",
    "verify_measured": "n={n} measured",
    "verify_planned": "n={n} planned",
    "verify_col_ttft_p99": "TTFT p99",
    "verify_col_tpot_p99": "TPOT p99",
    "verify_col_recovery": "Recovery",
    "verify_not_recovered": "not recovered",
    "verify_spread_heading": "Load per instance",
    "verify_spread_of": "n={n} of {planned} planned:",
    "verify_col_instance": "Instance",
    "verify_col_serving": "In pool",
    "verify_col_requests": "Requests",
    "verify_col_share": "Share",
    "verify_col_queue": "Queue max",
    "verify_col_kv": "KV cache",
    "verify_col_prefix": "Prefix hits",
    "verify_col_flag": "Flag",
    "verify_flag_ok": "ok",
    "verify_flag_over_share": "more than its share",
    "verify_flag_idle": "took nothing (ejected?)",
    "verify_flag_not_down": "taken out, still served",
    "verify_flag_unread": "no metrics",
    # page 1's burst-recovery risk from a verify run's burst (reports.pages.risks)
    "risk_burst_fleet": (
        "On the fleet (capplan verify, n={n} of {planned} planned instances), a {duration} "
        "burst at {burst} ({burst_ratio}× the design peak): TTFT p95 reached {burst_p95} "
        "during it and the SLO {held}; {after}"
    ),
    "risk_fleet_held": "held",
    "risk_fleet_missed": "did NOT hold",
    "risk_fleet_recovered_in": "TTFT p95 was back under the SLO's threshold {recovery} after it.",
    "risk_fleet_recovered": "the recovery stage after it met the SLO.",
    "risk_fleet_not_recovered": (
        "TTFT p95 was not back under the SLO's threshold before the test ended."
    ),
}

VERIFY_ZH: dict[str, str] = {
    "verify_answer_yes": "已于 {date} 在机队上验证：n={n} 在设计峰值下达到 SLO。",
    "verify_answer_failed": "未验证：{date} 机队上 n={n} 未达到 SLO。",
    "verify_answer_no": "未在机队上验证（未提供机队验证结果）。",
    "verify_heading": "机队验证",
    "verify_intro": (
        "规划的设计峰值（{rate}）经机队的负载均衡器发送，随后是突发与恢复，按 {slo} 并以上限搜索的"
        "稳态规则判定；旁边是引擎模型在相同实例数下对相同阶段的模拟。"
    ),
    "verify_compare_heading": "峰值下的规划（模拟）与实测",
    "verify_measured": "n={n} 实测",
    "verify_planned": "n={n} 规划",
    "verify_col_ttft_p99": "TTFT p99",
    "verify_col_tpot_p99": "TPOT p99",
    "verify_col_recovery": "恢复",
    "verify_not_recovered": "未恢复",
    "verify_spread_heading": "各实例负载",
    "verify_spread_of": "计划 {planned} 个中的 n={n} 个：",
    "verify_col_instance": "实例",
    "verify_col_serving": "在池中",
    "verify_col_requests": "请求数",
    "verify_col_share": "份额",
    "verify_col_queue": "最大排队",
    "verify_col_kv": "KV 缓存",
    "verify_col_prefix": "前缀命中",
    "verify_col_flag": "标记",
    "verify_flag_ok": "正常",
    "verify_flag_over_share": "超出其份额",
    "verify_flag_idle": "未承接流量（被摘除？）",
    "verify_flag_not_down": "已移出但仍在服务",
    "verify_flag_unread": "无指标",
    "risk_burst_fleet": (
        "在机队上（机队验证，计划 {planned} 个实例中的 n={n} 个），{burst}（设计峰值的 "
        "{burst_ratio} 倍）持续 {duration} 的突发：期间 TTFT p95 达到 {burst_p95}，SLO {held}；"
        "{after}"
    ),
    "risk_fleet_held": "得到满足",
    "risk_fleet_missed": "未得到满足",
    "risk_fleet_recovered_in": "突发结束 {recovery} 后 TTFT p95 回到 SLO 阈值以内。",
    "risk_fleet_recovered": "其后的恢复阶段达到 SLO。",
    "risk_fleet_not_recovered": "直到测试结束 TTFT p95 仍未回到 SLO 阈值以内。",
}
