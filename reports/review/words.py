"""The review PDF's words in English and Chinese (same keys in both; a test checks it)."""

from __future__ import annotations

from reports.i18n import Words

REVIEW_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Quarterly capacity review: {name}",
        "subtitle": "{services} services · generated {date}",
        "footer": "capplan capacity review · {name} · generated {date}",
        "fleet": (
            "The fleet: {instances} instances on {gpus} GPUs ({by_type}), about {cost} per "
            "month{change}."
        ),
        "fleet_change": "; since {prev}: {instances} instances, {gpus} GPUs, {cost} per month",
        "fleet_first": "; no previous review to compare with",
        "services_heading": "Services",
        "col_service": "Service",
        "col_peak": "Peak",
        "col_limit": "Per-instance limit",
        "col_instances": "Instances",
        "col_gpus": "GPUs",
        "col_cost": "$/month",
        "col_change": "Change",
        "col_risk": "Top risk",
        "new": "new",
        "none": "none",
        "pools_heading": "GPU pools: spares per service or shared",
        "col_gpu": "GPU",
        "col_for_load": "GPUs for load",
        "col_spares_each": "Spares per service",
        "col_spares_shared": "Spares shared",
        "col_cost_shared": "$/month shared",
        "pools_rule": "How the shared columns count: {rule}.",
        "risks_heading": "Risks, ranked across services",
        "col_level": "Level",
        "col_what": "What",
        "level_high": "high",
        "level_medium": "medium",
        "level_low": "low",
        "no_risks": "No risks found by the review's rules.",
        "service_heading": "Service: {name}",
        "service_intro": (
            "{model} on {gpu} x {tp}; profile {profile}; limit {limit}; growth x{growth} "
            "({source})."
        ),
        "source_given": "given",
        "source_data": "from the logs' trend",
        "source_none": "none assumed",
        "count_heading": "How sure the count is",
        "count_sentence": (
            "{n} instances ({level}: {low}-{high}). Planning peak {peak_iv}; limit {limit_iv}; "
            "{dominant}."
        ),
        "count_none": "no interval",
        "dominant_peak": "the uncertainty of the peak dominates",
        "dominant_limit": "the uncertainty of the limit dominates",
        "dominant_none": "neither dominates (both are fixed)",
        "count_method": "Method: {method}.",
        "trend_heading": "Growth from the data",
        "trend_none": "The logs span fewer than three full weeks: no trend fitted.",
        "hourly_heading": "Capacity by hour of day",
        "hourly_none": "The profile spans less than a day: no capacity by hour.",
        "chart_hourly": "Instances needed per hour of day (UTC)",
        "axis_hour": "hour of day (UTC)",
        "axis_instances": "instances",
        "day_weekday": "weekdays",
        "day_weekend": "weekends",
        "day_all": "all days",
        "peak_line": "sized for the peak",
        "col_fleet": "Fleet",
        "col_gpu_hours": "GPU-hours/month",
        "col_rule": "Rule",
        "opt_peak_all_day": "Peak all day",
        "opt_fixed_schedule": "Fixed schedule",
        "opt_autoscaled": "Autoscaled",
        "appendix_heading": "Appendix: inputs",
        "col_role": "Input",
        "col_path": "Path",
        "col_sha": "sha256",
    },
    "zh": {
        "title": "季度容量评审：{name}",
        "subtitle": "{services} 个服务 · 生成于 {date}",
        "footer": "capplan 容量评审 · {name} · 生成于 {date}",
        "fleet": (
            "整个集群：{instances} 个实例，{gpus} 块 GPU（{by_type}），每月约 {cost}{change}。"
        ),
        "fleet_change": "；与 {prev} 相比：实例 {instances}，GPU {gpus}，每月 {cost}",
        "fleet_first": "；没有可比较的上期评审",
        "services_heading": "各服务",
        "col_service": "服务",
        "col_peak": "峰值",
        "col_limit": "单实例上限",
        "col_instances": "实例数",
        "col_gpus": "GPU",
        "col_cost": "每月费用 $",
        "col_change": "变化",
        "col_risk": "首要风险",
        "new": "新增",
        "none": "无",
        "pools_heading": "GPU 池：按服务备用或共享备用",
        "col_gpu": "GPU",
        "col_for_load": "承载负载的 GPU",
        "col_spares_each": "按服务备用",
        "col_spares_shared": "共享备用",
        "col_cost_shared": "共享时每月 $",
        "pools_rule": "共享一栏的计法：{rule}。",
        "risks_heading": "风险（跨服务排序）",
        "col_level": "级别",
        "col_what": "内容",
        "level_high": "高",
        "level_medium": "中",
        "level_low": "低",
        "no_risks": "评审规则未发现风险。",
        "service_heading": "服务：{name}",
        "service_intro": (
            "{model} 运行于 {gpu} x {tp}；画像 {profile}；上限 {limit}；"
            "增长 x{growth}（{source}）。"
        ),
        "source_given": "给定",
        "source_data": "来自日志趋势",
        "source_none": "未假设",
        "count_heading": "实例数的把握",
        "count_sentence": (
            "{n} 个实例（{level}：{low}-{high}）。规划峰值 {peak_iv}；上限 {limit_iv}；"
            "主导因素：{dominant}。"
        ),
        "count_none": "无区间",
        "dominant_peak": "峰值的不确定性",
        "dominant_limit": "上限的不确定性",
        "dominant_none": "无（两者固定）",
        "count_method": "方法：{method}。",
        "trend_heading": "来自数据的增长",
        "trend_none": "日志不足三个完整周：未拟合趋势。",
        "hourly_heading": "按小时的容量",
        "hourly_none": "画像不足一天：无按小时容量。",
        "chart_hourly": "每小时所需实例数（UTC）",
        "axis_hour": "小时（UTC）",
        "axis_instances": "实例数",
        "day_weekday": "工作日",
        "day_weekend": "周末",
        "day_all": "所有日子",
        "peak_line": "按峰值配置",
        "col_fleet": "集群方式",
        "col_gpu_hours": "每月 GPU 小时",
        "col_rule": "规则",
        "opt_peak_all_day": "全天按峰值",
        "opt_fixed_schedule": "固定时间表",
        "opt_autoscaled": "自动扩缩",
        "appendix_heading": "附录：输入",
        "col_role": "输入",
        "col_path": "路径",
        "col_sha": "sha256",
    },
}


def rt(w: Words, key: str, **values: object) -> str:
    """The review string `key` in `w`'s language, formatted with `values`."""
    return REVIEW_STRINGS[w.lang][key].format(**values)
