"""How close is the engine model to a published *closed-loop* FP8 serving run on real GPUs?

    python bench/server_closed.py [--json FILE] [--kv-cache-dtype fp8|auto]

Table: `bench/data/server_published/nim_closed_loop.csv`, NVIDIA NIM 1.8.0's published
run of Llama-3.3-70B at FP8 on 2 x H100 (TP2), 5000 input and 500 output tokens per
request, at 1 to 250 concurrent users (AIPerf at a fixed concurrency): mean TTFT, mean ITL
and output tokens/s. Every row names its page. MLPerf Inference results are not used
(reserved for acceptance). This is the one FP8 serving table outside MLPerf the stored
sources hold in full; the rest of the page was out of reach (docs/accuracy/server.md).

Fit and check sets, stated before running: nothing is fitted here. Every row is a check of
the engine model as shipped (planner/engine/efficiency.yaml, fitted by
bench/engine_published.py on offline rows only).

Each row is run as a user would name it: `--engine trtllm --quantization fp8
--kv-cache-dtype fp8 --tp 2` on H100-80GB (NIM's FP8 profiles are TensorRT-LLM engines;
`--kv-cache-dtype auto` runs the same with a bf16 KV cache, for comparison). The closed
loop: `users` requests in flight from the start, each replaced by the next as it ends, for
max(6 x users, 40) requests of exactly 5000 / 500 tokens; the figures are over the requests
issued after the first 2 x users and before the last users (past the start, before the
drain). TTFT and ITL are the means over those requests, as AIPerf reports them; output
tokens/s is users x 500 / their mean end-to-end time (Little's law for a closed loop).

**Limit rows**, by the rule of bench/server_published.py stated on the published figures
only: a TTFT that rose to at least 1.5 x the previous concurrency's. For each, the bench
finds the concurrency at which the model's mean TTFT equals the published one (bisection
over whole users in [users / 4, users x 4]) and compares the *rate* the instance delivered
there: published requests/s (output tokens/s / 500) over the model's. 1 is exact; above 1
the model is pessimistic.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engine import EngineConfig, EngineRequest, build_engine_config  # noqa: E402
from planner.engine.engine import Engine  # noqa: E402
from planner.engine.precision import precision_overrides  # noqa: E402

TABLE = ROOT / "bench/data/server_published/nim_closed_loop.csv"
LOADED_RISE = 1.5  # as bench/server_published.py
BRACKET = 4
METRICS = ("TTFT mean ms", "ITL mean ms", "output tok/s")


@dataclass(frozen=True)
class Point:
    """The closed loop's figures at one concurrency."""

    ttft_ms: float
    itl_ms: float
    output_tok_s: float
    rate_rps: float

    def metric(self, name: str) -> float:
        return {"TTFT mean ms": self.ttft_ms, "ITL mean ms": self.itl_ms,
                "output tok/s": self.output_tok_s}[name]  # fmt: skip


def closed_loop(
    config: EngineConfig, users: int, isl: int, osl: int, spread_s: float = 0.0
) -> Point:
    """`users` requests of isl/osl tokens in flight, each replaced as it ends (see above);
    the users start evenly over `spread_s` (0: all at once)."""
    total = max(6 * users, 40)
    engine = Engine(config, token_events=False)
    issued = 0
    starts = [spread_s * k / users for k in range(users)]

    def issue(now: float) -> None:
        nonlocal issued
        engine.add_request(EngineRequest(f"q{issued}", isl, osl, now), now)
        issued += 1

    now = 0.0
    while engine.has_work() or starts:
        while starts and starts[0] <= now:
            issue(starts.pop(0))
        res = engine.step(now)
        now = res.end_s if res.duration_s > 0 or not starts else max(res.end_s, starts[0])
        for ev in res.events:
            if ev.kind == "finished" and issued < total:
                issue(now)
    kept = [engine.timeline(f"q{k}") for k in range(2 * users, total - users)]
    ttft = np.array([t.first_token_s - t.arrival_s for t in kept])  # type: ignore[operator]
    e2e = np.array([t.last_token_s - t.arrival_s for t in kept])  # type: ignore[operator]
    itl = (e2e - ttft) / (osl - 1)
    mean_e2e = float(e2e.mean())
    return Point(
        ttft_ms=float(ttft.mean() * 1e3),
        itl_ms=float(itl.mean() * 1e3),
        output_tok_s=users * osl / mean_e2e,
        rate_rps=users / mean_e2e,
    )


def implied_limit(
    at: Callable[[int], Point], users: int, published_ttft_ms: float
) -> tuple[float, str]:
    """The model's rate (req/s) where its mean TTFT equals `published_ttft_ms`: bisection
    over whole users in [users / BRACKET, users x BRACKET], the rate interpolated between the
    two users that straddle it (on log TTFT)."""
    lo, hi = max(1, users // BRACKET), users * BRACKET
    if at(lo).ttft_ms > published_ttft_ms:
        return at(lo).rate_rps, "below the bracket"
    if at(hi).ttft_ms < published_ttft_ms:
        return at(hi).rate_rps, "above the bracket"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).ttft_ms > published_ttft_ms:
            hi = mid
        else:
            lo = mid
    a, b = at(lo), at(hi)
    w = (math.log(published_ttft_ms) - math.log(a.ttft_ms)) / (
        math.log(b.ttft_ms) - math.log(a.ttft_ms)
    )
    return a.rate_rps + w * (b.rate_rps - a.rate_rps), ""


def _points(
    config: EngineConfig, isl: int, osl: int, spread: bool, cache: dict[int, Point]
) -> Callable[[int], Point]:
    """The closed loop's figures by users, cached; with `spread`, the users start evenly over
    one request's end-to-end time alone."""
    spread_s = osl / closed_loop(config, 1, isl, osl).output_tok_s if spread else 0.0

    def at(users: int) -> Point:
        if users not in cache:
            cache[users] = closed_loop(config, users, isl, osl, spread_s)
        return cache[users]

    return at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="one record per row")
    ap.add_argument("--kv-cache-dtype", default="fp8", choices=("fp8", "auto"))
    ap.add_argument(
        "--start", default="together", choices=("spread", "together"),
        help="users start all at once, as AIPerf does (default), or evenly over one request",
    )  # fmt: skip
    args = ap.parse_args()
    t0 = time.perf_counter()
    with TABLE.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    records: list[dict[str, Any]] = []
    print(f"{'row':<72} {'published':>9} {'predicted':>9} {'error':>7}  limit ratio")
    prev_ttft: dict[str, float] = {}
    cache: dict[str, dict[int, Point]] = {}
    for r in rows:
        isl, osl, users = int(r["isl"]), int(r["osl"]), int(r["concurrency"])
        config = build_engine_config(
            r["gpu"], r["model"], int(r["tp"]), engine="trtllm",
            max_model_len=isl + osl, record_token_times=False,
            **precision_overrides(r["quantization"], args.kv_cache_dtype),
        )  # fmt: skip
        series = (
            f"{r['engine']} {r['gpu']} {r['quantization']} {r['model']} tp{r['tp']} {isl}/{osl}"
        )
        at = _points(config, isl, osl, args.start == "spread", cache.setdefault(series, {}))

        got = at(users)
        published = {"TTFT mean ms": float(r["ttft_mean_ms"]),
                     "ITL mean ms": float(r["itl_mean_ms"]),
                     "output tok/s": float(r["output_tok_s"])}  # fmt: skip
        loaded = published["TTFT mean ms"] >= LOADED_RISE * prev_ttft.get(series, math.inf)
        prev_ttft[series] = published["TTFT mean ms"]
        for metric in METRICS:
            key = f"{series} x{users} users {metric}"
            rec: dict[str, Any] = {
                "row": key, "class": "trtllm/hopper closed loop", "published": published[metric],
                "predicted": got.metric(metric),
                "error": got.metric(metric) / published[metric] - 1,
                "reference": r["reference"], "limit_row": loaded and metric.startswith("TTFT"),
            }  # fmt: skip
            ratio_text = "-"
            if rec["limit_row"]:
                pub_rate = published["output tok/s"] / osl
                limit, bound = implied_limit(at, users, published[metric])
                rec.update(published_rate_rps=pub_rate, predicted_limit_rps=limit,
                           limit_ratio=pub_rate / limit, bound=bound)  # fmt: skip
                ratio_text = f"{pub_rate / limit:.2f}" + (f" ({bound})" if bound else "")
            records.append(rec)
            print(f"{key:<72} {published[metric]:>9.1f} {rec['predicted']:>9.1f} "
                  f"{rec['error']:>+7.1%}  {ratio_text}", flush=True)  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    print(f"\nkv cache {args.kv_cache_dtype}, users start {args.start}; every row a check:")
    for metric in METRICS:
        errs = [abs(r["error"]) for r in records if r["row"].endswith(metric)]
        print(f"  {metric:<14} n={len(errs):>2}  median |error| {np.median(errs):6.1%}  "
              f"worst {max(errs):6.1%}")  # fmt: skip
    ratios = [r["limit_ratio"] for r in records if "limit_ratio" in r]
    if ratios:
        err = np.median([abs(1 / x - 1) for x in ratios])
        print(
            f"  limit rows     n={len(ratios):>2}  published rate / predicted: "
            f"{', '.join(f'{x:.2f}' for x in ratios)}  median |limit error| {err:.1%}"
        )
    print(
        f"{len(rows)} concurrencies in {time.perf_counter() - t0:.0f} s wall clock "
        "(virtual-time model)"
    )


if __name__ == "__main__":
    main()
