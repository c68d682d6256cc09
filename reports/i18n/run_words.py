"""The report's words for what a run and a search did beyond their plan: requests cancelled in
flight (not failures), a stage stopped early or short of its asked load, the fast search's
method, routers whose lines coincide. Merged into STRINGS (reports.i18n.strings)."""

from __future__ import annotations

RUN_EN: dict[str, str] = {
    "col_cancelled": "Cancelled",
    "cancelled_table": "Cancelled: still in flight when the stage ended (not failures)",
    "offered_stopped": "{offered}, stopped early ({asked} asked)",
    "offered_short": "{offered} ({asked} asked)",
    "fleet_lines_coincide": "{routers}: the same attainment at every count, drawn side by side",
    "method_limit_fast": (
        "The per-instance limit is the highest {dimension} at which one instance met "
        "{slo}: the fast search measured what the client adds with one user, predicted the "
        "limit with the engine model, confirmed the prediction with open-loop chunks of load "
        "at it and corrected it by the model's measured error; measured levels one step "
        "below and above the answer check it."
    ),
    "axis_percent": "%",
}

RUN_ZH: dict[str, str] = {
    "col_cancelled": "已取消",
    "cancelled_table": "已取消:阶段结束时仍在进行的请求(不算失败)",
    "offered_stopped": "{offered},提前停止(要求 {asked})",
    "offered_short": "{offered}(要求 {asked})",
    "fleet_lines_coincide": "{routers}:各实例数下达成率相同,并排绘制",
    "method_limit_fast": (
        "单实例上限是单个实例满足 {slo} 时的最高{dimension}:快速搜索先用单个用户测出客户端的开销,"
        "用引擎模型预测上限,再在该负载下以开环负载片段确认预测,并按模型的实测误差修正;"
        "答案上下各一档的实测档位用来检验它。"
    ),
    "axis_percent": "%",
}
