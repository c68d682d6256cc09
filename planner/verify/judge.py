"""Judging a verify run's phases: one stage's records in, its SLO figures out (pure).

The figures are the SLO verdict of the limit search (planner.slo.verdict.evaluate): every
scheduled request counts, a failed one at +infinity, one still running when the stage closed
at its age. The same function judges a measured stage (records.parquet rows) and the engine
model's simulation of it (planner.verify.simulate), so the two differ only in what produced
the latencies. A 502 or 504 answered by a load balancer is its own error class here
(`gateway_502`, `gateway_504`): the instance behind it never saw or never finished the request.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from contracts.latency import quantile, request_values
from contracts.verify import Figures
from planner.slo.spec import Slo
from planner.slo.verdict import evaluate

GATEWAY_STATUSES = (502, 504)
QUANTILES = (0.95, 0.99)


def gateway_classes(records: pl.DataFrame) -> pl.DataFrame:
    """`records` with a failed request's class set to gateway_502 / gateway_504 when the
    load balancer answered that status."""
    if "status_code" not in records.columns or "error_class" not in records.columns:
        return records
    status = pl.col("status_code")
    expr = pl.col("error_class")
    for code in GATEWAY_STATUSES:
        expr = (
            pl.when(~pl.col("ok").fill_null(False) & (status == code))
            .then(pl.lit(f"gateway_{code}"))
            .otherwise(expr)
        )
    return records.with_columns(expr.alias("error_class"))


def errors_by_class(records: pl.DataFrame) -> dict[str, int]:
    """Failed (not censored) requests per error class."""
    if "error_class" not in records.columns or records.height == 0:
        return {}
    failed = records.filter(
        ~pl.col("ok").fill_null(False) & (pl.col("error_class").fill_null("") != "cancelled")
    )
    return dict(sorted(Counter(failed["error_class"].fill_null("unknown").to_list()).items()))


def _percentile(values: object, q: float) -> float | None:
    import numpy as np

    array = np.asarray(values, dtype=float)
    array = array[~np.isnan(array)]
    return float(quantile(array, q)) if array.size else None


def figures(
    records: pl.DataFrame, slo: Slo, *, start_s: float, duration_s: float, warmup_s: float = 0.0
) -> Figures:
    """One stage's figures under `slo`, leaving out requests scheduled in its first
    `warmup_s` seconds. Percentiles count every scheduled request (failed: +inf)."""
    verdict = evaluate(
        records, slo, duration_s=max(duration_s, warmup_s + 1e-6), warmup_s=warmup_s,
        start_s=start_s, resamples=1,
    )  # fmt: skip
    time_col = "intended_send_s" if "intended_send_s" in records.columns else "arrival_s"
    kept = records.filter(pl.col(time_col) >= start_s + warmup_s)
    values: dict[str, float | None] = {}
    for metric in ("ttft", "tpot", "e2e"):
        per_request = request_values(kept, metric, success_only=slo.success_only)
        for q in QUANTILES:
            values[f"{metric}_p{q * 100:g}_s"] = _percentile(per_request, q)
    return Figures(
        requests=verdict.scheduled,
        attainment=verdict.attainment,
        meets_slo=verdict.passed,
        ttft_p95_s=values["ttft_p95_s"],
        ttft_p99_s=values["ttft_p99_s"],
        tpot_p95_s=values["tpot_p95_s"],
        tpot_p99_s=values["tpot_p99_s"],
        e2e_p95_s=values["e2e_p95_s"],
    )
