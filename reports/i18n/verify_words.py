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
}
