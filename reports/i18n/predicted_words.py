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
