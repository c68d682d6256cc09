"""The words of a predicted limit's interval, both languages: "predicted, not measured" on the
first page when the plan's limit (or a reviewed service's) is the engine model's, the
interval's source (the
validation's spread for the engine and GPU class, or over all rows), and the interval beside
the engine model's prediction on the limit page.
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.limit import IntervalSource

PREDICTED_EN: dict[str, str] = {
    "predicted_answer": (
        "Predicted, not measured: the per-instance limit of {limit} is the engine model's (the "
        "load test ran against capplan's engine emulator, not a GPU); published server results "
        "put a GPU's measured limit between {low} and {high} ({source}). Measure it on the GPU "
        "(capplan limit) before buying."
    ),
    "predicted_service": (
        "Predicted, not measured: the per-instance limit of {service}, {limit}, is the engine "
        "model's (its load test ran against capplan's engine emulator, not a GPU); published "
        "server results put a GPU's measured limit between {low} and {high} ({source}). "
        "Measure it on the GPU (capplan limit) before buying."
    ),
    "interval_source_class": "the {low_q}-{high_q} spread of {rows} published {basis} results",
    "interval_source_overall": (
        "the {low_q}-{high_q} spread of all {rows} published results; {class_key} has "
        "{class_rows}, too few for its own"
    ),
    "prediction_interval": (
        "Predicted, not measured: published server results put a GPU's limit between {low} "
        "and {high} ({source})."
    ),
    "unconfirmed_answer": (
        "Unconfirmed: the per-instance limit of {limit} comes from a search that stopped "
        "before it confirmed its answer{failed}; the plan was made with it anyway "
        "(--accept-unconfirmed). Finish the search (capplan limit --resume) before buying."
    ),
    "unconfirmed_failed": " (the lowest load it saw fail: {high})",
    "method_limit_unconfirmed": (
        "The per-instance limit is the highest {dimension} at which one instance met {slo} "
        "before the search stopped: it did not narrow the gap between the highest passing "
        "and the lowest failing level to {tol}, so its answer is unconfirmed."
    ),
    "method_unconfirmed_note": (
        "Its answer is unconfirmed: the search stopped, or the measured levels around it did "
        "not hold it."
    ),
}

PREDICTED_ZH: dict[str, str] = {
    "predicted_answer": (
        "预测值,未经实测:每实例上限 {limit} 来自引擎模型(负载测试的对象是 capplan 的引擎仿真器,"
        "而非 GPU);按公开服务结果,GPU 上的实测上限应在 {low} 至 {high} 之间({source})。"
        "采购前请用 capplan 的上限搜索在 GPU 上实测。"
    ),
    "predicted_service": (
        "预测值,未经实测:{service} 的每实例上限 {limit} 来自引擎模型(其负载测试的对象是 capplan "
        "的引擎仿真器,而非 GPU);按公开服务结果,GPU 上的实测上限应在 {low} 至 {high} 之间"
        "({source})。采购前请用 capplan 的上限搜索在 GPU 上实测。"
    ),
    "interval_source_class": "{rows} 个公开 {basis} 结果的 {low_q}-{high_q} 分布",
    "interval_source_overall": (
        "全部 {rows} 个公开结果的 {low_q}-{high_q} 分布;{class_key} 仅有 {class_rows} 个,"
        "不足以单独计算"
    ),
    "prediction_interval": (
        "预测值,未经实测:按公开服务结果,GPU 上的上限应在 {low} 至 {high} 之间({source})。"
    ),
    "unconfirmed_answer": (
        "未经确认:每实例上限 {limit} 来自一次在确认结果之前就停止的搜索{failed};计划仍以它为"
        "依据。采购前请用 capplan 完成这次上限搜索。"
    ),
    "unconfirmed_failed": "(它见到的最低不达标负载:{high})",
    "method_limit_unconfirmed": (
        "单实例上限是搜索停止之前单个实例满足 {slo} 时的最高{dimension}:搜索没有把最高达标档位"
        "与最低不达标档位之间的差距缩小到 {tol},因此结果未经确认。"
    ),
    "method_unconfirmed_note": "其结果未经确认:搜索提前停止,或答案上下的实测档位没有支持它。",
}


def interval_source(t: Callable[..., str], source: IntervalSource) -> str:
    """The interval's source in `t`'s language: the spread of its engine and GPU class, or of
    all published rows and why."""
    quantiles = {"low_q": f"p{round(source.low_quantile * 100)}",
                 "high_q": f"p{round(source.high_quantile * 100)}"}  # fmt: skip
    if source.basis == "overall":
        return t(
            "interval_source_overall",
            rows=source.rows,
            class_key=source.class_key,
            class_rows=source.class_rows,
            **quantiles,
        )
    return t("interval_source_class", rows=source.rows, basis=source.basis, **quantiles)
