"""Stage statistics from a run's records: percentiles, stage summaries, recovery time (pure).

Load generation summarizes its own records here (no SLO verdicts: those live in planner/):
`summarize_plan` turns records.parquet rows into the StageSummary entries of stages.json,
whether `capplan loadtest` or a plain `locust -f locustfiles/llm.py` run wrote them, and
`percentiles` also serves the live numbers of the web UI's capplan tab.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl

from contracts.recovery import recovery_curve
from contracts.run import Percentiles, Stage, StagePlan, StageSummary, StageValidity
from profiles.model import Prefix

RECOVERY_FACTOR = 1.2  # without an SLO threshold: recovered at 1.2 x the steady p95


def percentiles(values: Any) -> Percentiles:
    """count, mean, p50/p90/p95/p99 and max of the non-null values (seconds)."""
    arr = (
        np.asarray([v for v in values if v is not None], dtype=float)
        if not isinstance(values, np.ndarray)
        else values
    )
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return Percentiles()
    p50, p90, p95, p99 = np.percentile(arr, [50, 90, 95, 99])
    return Percentiles(
        count=int(arr.size),
        mean=float(arr.mean()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        max=float(arr.max()),
    )


def column_values(df: pl.DataFrame, expr: pl.Expr) -> np.ndarray:
    """The non-null values of `expr` over `df` as floats."""
    return df.select(expr.cast(pl.Float64)).to_series().drop_nulls().to_numpy()


def _mean_in_flight(records: pl.DataFrame, start_s: float, end_s: float) -> float:
    sent = records.filter(pl.col("sent_s").is_not_null())
    if sent.height == 0 or end_s <= start_s:
        return 0.0
    lo = pl.max_horizontal(pl.col("sent_s"), pl.lit(start_s))
    hi = pl.min_horizontal(pl.col("end_s").fill_null(end_s), pl.lit(end_s))
    busy = sent.select((hi - lo).clip(lower_bound=0.0).sum()).item()
    return float(busy) / (end_s - start_s)


PREFIX_HIT_TOLERANCE = 0.10  # measured vs expected prefix-cache hit ratio, absolute
OFFERED_TOLERANCE = 0.05  # offered vs asked rate, beyond Poisson noise
EMULATOR_BEHIND_SHARE = 0.02  # engine seconds the emulator lost, as a share of the stage


def _counter_delta(server: pl.DataFrame, name: str, start_s: float, end_s: float) -> float | None:
    rows = server.filter(
        pl.col("name").is_in([name, f"{name}_total"])
        & (pl.col("t_s") >= start_s)
        & (pl.col("t_s") <= end_s)
    )
    if rows.height < 2:
        return None
    by_t = rows.group_by("t_s").agg(pl.col("value").sum()).sort("t_s")
    return float(by_t["value"][-1] - by_t["value"][0])


def _cache_tokens(server: pl.DataFrame) -> int | None:
    """The server's KV cache in tokens, from vLLM's cache_config_info labels."""
    rows = server.filter(pl.col("name") == "vllm:cache_config_info")
    for labels in rows["labels"].unique().to_list():
        try:
            parsed = json.loads(labels) if labels else {}
            return int(parsed["num_gpu_blocks"]) * int(parsed["block_size"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def expected_hit_ratio(prefix: Prefix, cache_tokens: int | None) -> float | None:
    """The profile's LRU prefix-cache hit ratio at `cache_tokens` (log-linear between the
    profile's cache sizes); the ideal ratio (an infinite cache) when the size is unknown."""
    points = sorted((p.cache_tokens, p.hit_ratio) for p in prefix.lru_hit_ratio)
    if cache_tokens is None or not points:
        return prefix.ideal_hit_ratio
    xs = np.log([max(x, 1) for x, _ in points])
    return float(np.interp(math.log(max(cache_tokens, 1)), xs, [y for _, y in points]))


def stage_validity(
    rows: pl.DataFrame,
    stage: Stage,
    start_s: float,
    end_s: float,
    server: pl.DataFrame | None,
    prefix: Prefix | None,
) -> StageValidity:
    """Offered against asked rate, schedule lag, and (where the server's /metrics counts
    prefix-cache queries and hits, as vLLM does) the measured hit ratio against what the
    profile predicts for the server's cache size; `warnings` says what differs."""
    warnings: list[str] = []
    share: float | None = None
    duration_s = max(end_s - start_s, 1e-9)
    if stage.kind == "open" and stage.requests:  # a request count: all of them, no noise
        share = rows.height / stage.requests
        if rows.height != stage.requests:
            warnings.append(f"scheduled {rows.height} requests against {stage.requests} asked")
    elif stage.kind == "open" and stage.rate_rps and stage.arrival != "replay":
        expected = stage.rate_rps * duration_s
        share = rows.height / expected if expected > 0 else None
        noise = 3.0 / math.sqrt(max(expected, 1.0))
        if share is not None and abs(share - 1.0) > OFFERED_TOLERANCE + noise:
            warnings.append(
                f"offered {rows.height / duration_s:.3g} req/s against {stage.rate_rps:.3g} asked"
            )
    lag = column_values(rows, pl.col("schedule_lag_s"))
    lag_p99 = float(np.percentile(lag, 99)) if lag.size else None
    measured = expected_hit = None
    cache = None
    behind = None
    if server is not None and server.height:
        behind = _counter_delta(server, "capplan_emulator_behind_seconds", start_s, end_s)
    if behind is not None and behind > EMULATOR_BEHIND_SHARE * duration_s:
        warnings.append(
            f"the emulator fell {behind:.3g} s behind its clock: this machine's CPU, not the "
            "engine model, set the pace (lower its --time-scale)"
        )
    if server is not None and server.height and prefix is not None and prefix.available:
        hits = _counter_delta(server, "vllm:prefix_cache_hits", start_s, end_s)
        queries = _counter_delta(server, "vllm:prefix_cache_queries", start_s, end_s)
        if hits is not None and queries:
            measured = hits / queries
            cache = _cache_tokens(server)
            expected_hit = expected_hit_ratio(prefix, cache)
            if expected_hit is not None and abs(measured - expected_hit) > PREFIX_HIT_TOLERANCE:
                warnings.append(
                    f"prefix-cache hit ratio {measured:.0%} on the server against "
                    f"{expected_hit:.0%} that the profile predicts"
                    + (f" for a {cache:,}-token cache" if cache else "")
                    + ": the test's prompts reuse prefixes differently, another workload"
                )
    return StageValidity(
        asked_rps=stage.rate_rps,
        offered_share=share,
        schedule_lag_p99_s=lag_p99,
        prefix_hit_measured=measured,
        prefix_hit_expected=expected_hit,
        cache_tokens=cache,
        warnings=warnings,
    )


def _server_summary(server: pl.DataFrame, start_s: float, end_s: float) -> dict[str, float]:
    window = server.filter((pl.col("t_s") >= start_s) & (pl.col("t_s") <= end_s))
    out: dict[str, float] = {}
    if window.height == 0:
        return out
    gauges = (
        window.filter(pl.col("type") == "gauge").group_by("name", "t_s").agg(pl.col("value").sum())
    )
    for name, grp in gauges.group_by("name"):
        values = grp["value"]
        out[f"{name[0]}:mean"] = float(values.mean())  # type: ignore[arg-type]
        out[f"{name[0]}:max"] = float(values.max())  # type: ignore[arg-type]
    counters = (
        window.filter(pl.col("type") == "counter")
        .group_by("name", "t_s")
        .agg(pl.col("value").sum())
    )
    for name, grp in counters.group_by("name"):
        grp = grp.sort("t_s")
        span = float(grp["t_s"][-1] - grp["t_s"][0])
        if span > 0:
            out[f"{name[0]}:rate_per_s"] = float(grp["value"][-1] - grp["value"][0]) / span
    return dict(sorted(out.items()))


def _error_messages(errors: pl.DataFrame) -> dict[str, str]:
    """Per error class, its most frequent message (ties: the first in sort order)."""
    if "error_message" not in errors.columns:
        return {}
    counts = (
        errors.drop_nulls(["error_class", "error_message"])
        .group_by("error_class", "error_message")
        .len()
        .sort(["error_class", "len", "error_message"], descending=[False, True, False])
    )
    first = counts.unique("error_class", keep="first", maintain_order=True)
    return {str(c): str(m) for c, m in first.select("error_class", "error_message").iter_rows()}


def summarize_stage(
    records: pl.DataFrame,
    stage: Stage,
    start_s: float,
    end_s: float,
    *,
    server: pl.DataFrame | None = None,
    baseline_ttft_p95_s: float | None = None,
    slo_ttft_s: float | None = None,
    burst: tuple[float, float] | None = None,
    prefix: Prefix | None = None,
) -> StageSummary:
    """The StageSummary of `stage` from the run's records (seconds since run start).

    Rows belong to a stage by their `stage` column (the stage they were scheduled in). For a
    recovery stage after a `burst` (start, end) with a threshold (`slo_ttft_s`, else 1.2 x
    `baseline_ttft_p95_s`), also the recovery curve and time (contracts.recovery). `prefix`
    (the profile's prefix reuse) lets the stage's validity compare the server's measured
    prefix-cache hit ratio with the profile's.
    """
    rows = records.filter(pl.col("stage") == stage.name)
    ok = rows.filter(pl.col("ok"))
    duration = max(end_s - start_s, 1e-9)
    errors = rows.filter(~pl.col("ok"))
    by_class = errors.group_by("error_class").len().sort("error_class")
    errors_by_class = {str(c): int(n) for c, n in by_class.iter_rows()}
    error_messages = _error_messages(errors)
    out_tokens = ok["output_tokens"].fill_null(0).sum()
    if "itl_gaps_s" in ok.columns:
        gaps = ok.select(pl.col("itl_gaps_s").explode().drop_nulls()).to_series().to_numpy()
    else:  # a frame with only RECORD_COLUMNS: per-request mean gaps stand in for the pool
        gaps = column_values(ok, pl.col("itl_mean_s"))
    recovery_s: float | None = None
    recovered: bool | None = None
    curve = None
    if stage.role == "recovery" and burst is not None:
        threshold = (
            slo_ttft_s
            if slo_ttft_s is not None
            else (
                RECOVERY_FACTOR * baseline_ttft_p95_s if baseline_ttft_p95_s is not None else None
            )
        )
        if threshold is not None:
            curve = recovery_curve(records, burst[0], burst[1], end_s, threshold)
            recovery_s = curve.recovery_s
            recovered = recovery_s is not None
    return StageSummary(
        name=stage.name,
        kind=stage.kind,
        role=stage.role,
        start_s=start_s,
        end_s=end_s,
        duration_s=duration,
        target_rate_rps=stage.rate_rps,
        target_users=stage.users,
        scheduled=rows.height,
        completed=ok.height,
        errors=errors.height,
        errors_by_class=errors_by_class,
        error_messages=error_messages,
        offered_rps=rows.height / duration,
        achieved_rps=ok.height / duration,
        output_tokens_per_s=float(out_tokens) / duration,
        ttft_s=percentiles(column_values(ok, pl.col("ttft_s"))),
        tpot_s=percentiles(column_values(ok, pl.col("tpot_s"))),
        itl_s=percentiles(gaps.astype(float)),
        e2e_s=percentiles(column_values(ok, pl.col("e2e_s"))),
        schedule_lag_s=percentiles(column_values(rows, pl.col("schedule_lag_s"))),
        ttft_from_intended_s=percentiles(
            column_values(ok, pl.col("first_token_s") - pl.col("intended_send_s"))
        ),
        mean_in_flight=_mean_in_flight(records, start_s, end_s),
        tokens_estimated=bool(ok["tokens_estimated"].any()) if ok.height else False,
        recovery_s=recovery_s,
        recovered=recovered,
        recovery_curve=curve,
        validity=stage_validity(rows, stage, start_s, end_s, server, prefix),
        server=_server_summary(server, start_s, end_s) if server is not None else {},
    )


def summarize_plan(
    records: pl.DataFrame,
    plan: StagePlan,
    plan_start_s: float,
    *,
    server: pl.DataFrame | None = None,
    slo_ttft_s: float | None = None,
    previous: list[StageSummary] | None = None,
    stop_s: float | None = None,
    stage_ends_s: dict[str, float] | None = None,
    prefix: Prefix | None = None,
) -> list[StageSummary]:
    """Summaries of every stage of `plan`, started at `plan_start_s`; recovery stages are
    measured against the last steady stage and burst before them (in `previous` too).
    With `stop_s` (a run stopped early), stages not begun by then are left out and the one
    running then ends there. `stage_ends_s` holds stages ended early (steady state reached,
    recovered): each ends there and the next one starts there. A stage with a request count
    (`Stage.requests`) runs until the last of its requests ended, as vLLM's benchmark
    duration does."""
    history = list(previous or [])
    ends = stage_ends_s or {}
    out: list[StageSummary] = []
    t = plan_start_s
    for stage in plan.stages:
        if stop_s is not None and t >= stop_s:
            break
        end_s = min(t + stage.duration_s, ends.get(stage.name, math.inf))
        if stage.requests is not None:  # a request count lasts until its last answer (vLLM)
            last = records.filter(pl.col("stage") == stage.name)["end_s"].max()
            end_s = max(end_s, float(last)) if last is not None else end_s  # type: ignore[arg-type]
        if stop_s is not None:
            end_s = min(end_s, stop_s)
        earlier = history + out
        steady = next((s for s in reversed(earlier) if s.role == "steady"), None)
        burst = next((s for s in reversed(earlier) if s.role == "burst"), None)
        out.append(
            summarize_stage(
                records,
                stage,
                t,
                end_s,
                server=server,
                baseline_ttft_p95_s=steady.ttft_from_intended_s.p95 if steady else None,
                slo_ttft_s=slo_ttft_s,
                burst=(burst.start_s, burst.end_s) if burst else None,
                prefix=prefix,
            )
        )
        t = end_s
    return out
