"""How close is the engine model to published *server* results: latency at a stated Poisson
rate, and the per-instance limit that latency implies, on real GPUs.

    python bench/server_published.py [--max-requests N] [--json FILE] [--write-spread]
        [--tables own,trtllm] [--spread-from JSON ...]

Tables: `bench/data/server_published/server_published.csv` (SGLang's own comparison with
vLLM 0.6.0 on A100 and 4xH100, DataCrunch's SGLang runs on 4xH200; every row names its
repository, path and commit) and the `online` rows of
`bench/data/engine_published/trtllm_v014.csv` (TensorRT-LLM 0.14's Triton serving table:
500 requests at 2-32 Poisson req/s, mean TTFT and ITL). MLPerf Inference results are not
used (reserved for acceptance).

Fit and check sets, stated before running: nothing is fitted here. Every row is a check of
the engine model as shipped (planner/engine/efficiency.yaml, fitted by
bench/engine_published.py on offline rows only); no factor is tuned on these rows.

For each row the bench builds the engine, GPU and precision the source states, draws the
requests (ShareGPT lengths bootstrapped from Lambda's per-request ShareGPT files, or the
stated random lengths), sends them at Poisson arrivals of the stated rate (seeded), runs the
engine model in virtual time and prints published, predicted and error (predicted /
published - 1) of the row's metric.

**Limit rows.** A published (rate, latency) pair is a limit: under the SLO "metric <= the
published value" the highest rate is the published rate, as long as the latency rises with
the rate. The bench takes as limit rows those whose published figure rose by at least 50 %
(`--rise`) from the same series' figure at the next lower published rate: a rule on the
published figures only, stated before running. Where latency is nearly flat in the rate, no
rate is determined by it (a 10 % latency error moves the implied rate several-fold), and an
SLO limit sits where queueing makes latency climb. For each, it finds by bisection the rate at
which the model's metric equals the published value (the predicted limit, common random
numbers across rates) and prints published rate / predicted limit. Their quantiles per
engine and GPU class are the spread `capplan whatif` puts around each predicted limit
(`--write-spread` writes planner/whatif/prediction_spread.yaml; a class with fewer than 4
rows takes the overall spread).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engine import EngineConfig, EngineRequest, build_engine_config, simulate  # noqa: E402
from planner.whatif.interval import SPREAD_PATH  # noqa: E402
from testkit.published import metric_value, read_table, scenario, sharegpt_lengths  # noqa: E402

OWN_TABLE = ROOT / "bench/data/server_published/server_published.csv"
TRT_TABLE = ROOT / "bench/data/engine_published/trtllm_v014.csv"
SHAREGPT_FOLDER = ROOT.parent / "shared/data/engine_published"
LOADED_RISE = 1.5  # a limit row's figure is at least this much above its series' previous
BRACKET = 4.0  # the predicted limit is searched in [rate / BRACKET, rate x BRACKET]
QUANTILES = (0.1, 0.9)
MIN_ROWS = 4
GPU_CLASSES = {
    "hopper": [
        "H100-80GB",
        "H200-141GB",
        "H20-96GB",
        "H100-PCIe-80GB",
        "H100-NVL-94GB",
        "H200-NVL-141GB",
    ],
    "ampere": ["A100-80GB", "A10-24GB", "A100-PCIe-80GB"],
    "ada": ["L40S-48GB", "L4-24GB"],
    "blackwell": ["B200-180GB"],
    "cdna3": ["MI300X-192GB"],
}


@dataclass(frozen=True, kw_only=True)
class ServerRow:
    """One published serving figure at a stated rate, as the engine model runs it."""

    key: str
    series: str  # rows that differ only in rate
    engine: str  # the class key's engine family
    gpu: str
    rate_rps: float
    metric: str
    published: float
    reference: str
    config: EngineConfig
    lengths: tuple[tuple[int, int], ...]
    unit_arrivals_s: tuple[float, ...]  # Poisson arrivals at 1 req/s (seeded)


def _unit_poisson(n: int, seed: int) -> tuple[float, ...]:
    gaps = np.random.default_rng(seed).exponential(1.0, n)
    arrivals = np.cumsum(gaps) - gaps[0]
    return tuple(float(a) for a in arrivals)


def _lengths(dataset: str, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    if dataset == "sharegpt":
        ins, outs = sharegpt_lengths(SHAREGPT_FOLDER)
        pick = rng.integers(0, len(ins), n)
        return [(int(ins[i]), max(1, int(outs[i]))) for i in pick]
    m = re.fullmatch(r"random (\d+)/(\d+) ratio ([\d.]+)", dataset)
    if m is None:
        raise ValueError(f"dataset {dataset!r} is not representable")
    i_len, o_len, ratio = int(m.group(1)), int(m.group(2)), float(m.group(3))
    # sglang.bench_serving: each length uniform in [max(len x ratio, 1), len]
    ins = rng.integers(max(int(i_len * ratio), 1), i_len + 1, n)
    outs = rng.integers(max(int(o_len * ratio), 1), o_len + 1, n)
    return [(int(a), int(b)) for a, b in zip(ins, outs, strict=True)]


def _own_settings(r: dict[str, str]) -> dict[str, Any]:
    """The engine settings the source states (its launch commands)."""
    out: dict[str, Any] = {"prefix_caching": False}  # --disable-radix-cache; vLLM 0.6 default
    if r["engine_profile"] == "vllm@0.6":
        out.update(scheduler_steps=10, max_model_len=4096)
    elif int(r["tp"]) > 1:
        out["gpu_memory_utilization"] = 0.85  # SGLang's mem_frac at tp 4 (the README says)
    else:
        out["gpu_memory_utilization"] = 0.88  # SGLang 0.3's mem_frac at tp 1
    return out


def own_rows(path: Path, cap: int | None, seed: int) -> list[ServerRow]:
    rows = []
    with path.open(newline="", encoding="utf-8") as fh:
        for i, r in enumerate(csv.DictReader(fh)):
            n = min(int(r["num_prompts"]), cap or 10**9)
            rate = float(r["rate_rps"])
            lengths = _lengths(r["dataset"], n, np.random.default_rng(seed + i))
            settings = _own_settings(r)
            longest = max(a + b for a, b in lengths)
            settings.setdefault("max_model_len", max(4096, longest))
            precision = {"dtype_bytes": 2} if r["precision"] in ("BF16", "FP16") else None
            assert precision is not None, r["precision"]
            config = build_engine_config(
                r["gpu"], r["model"], int(r["tp"]), engine=r["engine_profile"],
                record_token_times=r["metric"].startswith("ITL"), **precision, **settings,
            )  # fmt: skip
            series = " ".join((r["source"], r["engine"], r["gpu"], r["model"], r["dataset"],
                               r["metric"]))  # fmt: skip
            rows.append(
                ServerRow(
                    key=f"{r['engine']} {r['gpu']} {r['model']} tp{r['tp']} {r['dataset']} "
                    f"@{rate:g}/s {r['metric']}",
                    series=series,
                    engine=r["engine_profile"].split("@")[0],
                    gpu=r["gpu"],
                    rate_rps=rate,
                    metric=r["metric"],
                    published=float(r["published"]),
                    reference=r["reference"],
                    config=config,
                    lengths=tuple(lengths),
                    unit_arrivals_s=_unit_poisson(n, seed + 1000 + i),
                )
            )
    return rows


def trt_rows(path: Path, cap: int | None, seed: int) -> list[ServerRow]:
    """TensorRT-LLM's online rows at a finite rate (TTFT mean, ITL mean)."""
    rows = []
    for row in read_table(path):
        m = re.match(r"online ([\d.]+) QPS", row.workload)
        if m is None or row.metric not in ("TTFT mean ms", "ITL mean ms"):
            continue
        sc = scenario(row, path.parent, max_requests=cap, seed=seed)
        if sc.config is None:
            continue
        rate = float(m.group(1))
        lengths = tuple((q.prompt_tokens, q.max_tokens) for q in sc.requests)
        rows.append(
            ServerRow(
                key=f"TensorRT-LLM 0.14 {row.gpu} {row.precision} {row.model} tp{row.tp} "
                f"{row.workload.split(' fixed ')[1]} @{rate:g}/s {row.metric}",
                series=f"{row.gpu} {row.precision} {row.model} {row.tp} "
                f"{row.workload.split(' fixed ')[1]} {row.metric}",
                engine="trtllm",
                gpu=row.gpu,
                rate_rps=rate,
                metric=row.metric,
                published=row.published,
                reference=row.reference,
                config=sc.config,
                lengths=lengths,
                unit_arrivals_s=_unit_poisson(len(lengths), seed + 5000 + row.index),
            )
        )
    return rows


def predict(row: ServerRow, rate_rps: float) -> float:
    """The row's metric when its requests arrive at `rate_rps` (same draws at every rate)."""
    requests = [
        EngineRequest(f"q{i}", p, o, a / rate_rps)
        for i, ((p, o), a) in enumerate(zip(row.lengths, row.unit_arrivals_s, strict=True))
    ]
    return metric_value(row.metric, simulate(requests, row.config))


def implied_limit(row: ServerRow, at: Callable[[float], float]) -> tuple[float, str]:
    """The rate at which the model's metric equals the published figure (bisection on log
    rate in [rate / BRACKET, rate x BRACKET]); ('bound' when it lies outside)."""
    lo, hi = math.log(row.rate_rps / BRACKET), math.log(row.rate_rps * BRACKET)
    if at(math.exp(lo)) > row.published:
        return math.exp(lo), "below the bracket"
    if at(math.exp(hi)) < row.published:
        return math.exp(hi), "above the bracket"
    for _ in range(9):
        mid = (lo + hi) / 2
        if at(math.exp(mid)) > row.published:
            hi = mid
        else:
            lo = mid
    return math.exp((lo + hi) / 2), ""


def limit_rows(rows: list[ServerRow], rise: float = LOADED_RISE) -> set[str]:
    """Rows whose published figure rose >= `rise` x the series' figure at the previous rate."""
    out = set()
    by_series: dict[str, list[ServerRow]] = {}
    for r in rows:
        by_series.setdefault(r.series, []).append(r)
    for series in by_series.values():
        series.sort(key=lambda r: r.rate_rps)
        for prev, cur in zip(series, series[1:], strict=False):
            if cur.rate_rps > prev.rate_rps and cur.published >= rise * prev.published:
                out.add(cur.key)
    return out


def gpu_class(gpu: str) -> str:
    return next((c for c, gpus in GPU_CLASSES.items() if gpu in gpus), "other")


def spread(ratios: list[float]) -> dict[str, float]:
    lo, hi = np.quantile(ratios, QUANTILES)
    return {"rows": len(ratios), "low": round(float(lo), 3), "high": round(float(hi), 3)}


def write_spread(records: list[dict[str, Any]], command: str) -> dict[str, Any]:
    ratios = [r for r in records if r.get("limit_ratio") is not None]
    classes: dict[str, list[float]] = {}
    for r in ratios:
        classes.setdefault(r["class"], []).append(r["limit_ratio"])
    doc = {
        "source": f"`{command}` on {dt.date.today().isoformat()}: published limit / predicted "
        f"limit on {len(ratios)} limit rows of published server results (Poisson arrivals)",
        "quantiles": list(QUANTILES),
        "min_rows": MIN_ROWS,
        "gpu_classes": GPU_CLASSES,
        "overall": spread([r["limit_ratio"] for r in ratios]),
        "classes": {k: spread(v) for k, v in sorted(classes.items())},
    }
    import yaml

    header = (
        "# Written by `python bench/server_published.py` (--write-spread or --spread-from);\n"
        "# read by planner/whatif/interval.py. Do not edit by hand.\n"
    )
    SPREAD_PATH.write_text(header + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-requests", type=int, default=None, help="cap each row's requests")
    ap.add_argument("--json", type=Path, help="one record per row")
    ap.add_argument("--write-spread", action="store_true", help="write prediction_spread.yaml")
    ap.add_argument(
        "--tables", default="own,trtllm", help="own (server_published.csv), trtllm (online rows)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rise", type=float, default=LOADED_RISE, help="limit-row rule (x prev.)")
    ap.add_argument(
        "--spread-from",
        type=Path,
        nargs="+",
        help="write the spread from --json files of earlier runs (no simulation)",
    )
    args = ap.parse_args()
    if args.spread_from:
        records = [r for f in args.spread_from for r in json.loads(f.read_text(encoding="utf-8"))]
        summarise(records)
        names = " ".join(f.name for f in args.spread_from)
        write_spread(records, f"python bench/server_published.py --json ... ({names})")
        print(f"wrote {SPREAD_PATH.relative_to(ROOT)} from {names}")
        return
    t0 = time.perf_counter()
    tables = set(args.tables.split(","))
    rows = own_rows(OWN_TABLE, args.max_requests, args.seed) if "own" in tables else []
    if "trtllm" in tables:
        rows += trt_rows(TRT_TABLE, args.max_requests, args.seed)
    loaded = limit_rows(rows, args.rise)
    records: list[dict[str, Any]] = []
    print(f"{'row':<86} {'published':>9} {'predicted':>9} {'error':>7}  limit ratio")
    for row in rows:
        cache: dict[float, float] = {}

        def at(rate: float, row: ServerRow = row, cache: dict[float, float] = cache) -> float:
            if rate not in cache:
                cache[rate] = predict(row, rate)
            return cache[rate]

        got = at(row.rate_rps)
        rec: dict[str, Any] = {
            "row": row.key, "class": f"{row.engine}/{gpu_class(row.gpu)}",
            "published": row.published, "predicted": got, "error": got / row.published - 1,
            "reference": row.reference, "limit_row": row.key in loaded,
        }  # fmt: skip
        ratio_text = "-"
        if row.key in loaded:
            limit, bound = implied_limit(row, at)
            rec.update(predicted_limit_rps=limit, limit_ratio=row.rate_rps / limit, bound=bound)
            ratio_text = f"{row.rate_rps / limit:.2f}" + (f" ({bound})" if bound else "")
        records.append(rec)
        if args.json:  # after every row: a stopped run keeps what it computed
            args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
        print(f"{row.key:<86} {row.published:>9.1f} {got:>9.1f} {rec['error']:>+7.1%}  "
              f"{ratio_text}", flush=True)  # fmt: skip
    summarise(records)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    if args.write_spread:
        command = "python bench/server_published.py --write-spread" + (
            f" --max-requests {args.max_requests}" if args.max_requests else ""
        )
        write_spread(records, command)
        print(f"wrote {SPREAD_PATH.relative_to(ROOT)}")
    print(f"{len(rows)} rows in {time.perf_counter() - t0:.0f} s wall clock (virtual-time model)")


def summarise(records: list[dict[str, Any]]) -> None:
    """Median and worst |error| per metric and class (all rows are checks), and the limit
    ratio's spread per class."""
    print("\nlatency at the stated rate (every row a check; nothing fitted here):")
    groups: dict[str, list[float]] = {}
    for r in records:
        metric_name = r["row"].rsplit(" ", 3)[-3:]
        groups.setdefault(f"{r['class']} {' '.join(metric_name)}", []).append(abs(r["error"]))
        groups.setdefault("all rows", []).append(abs(r["error"]))
    for k, errs in sorted(groups.items()):
        print(f"  {k:<40} n={len(errs):>3}  median |error| {np.median(errs):6.1%}  "
              f"worst {max(errs):6.1%}")  # fmt: skip
    ratios: dict[str, list[float]] = {}
    for r in records:
        if r.get("limit_ratio") is not None:
            ratios.setdefault(r["class"], []).append(r["limit_ratio"])
            ratios.setdefault("overall", []).append(r["limit_ratio"])
    print(
        "\nlimit rows: published rate / predicted limit (1 = exact; > 1 the model is pessimistic)"
    )
    for k, v in sorted(ratios.items()):
        lo, med, hi = np.quantile(v, (QUANTILES[0], 0.5, QUANTILES[1]))
        err = np.median([abs(1 / x - 1) for x in v])
        print(f"  {k:<20} n={len(v):>3}  p10 {lo:.2f}  median {med:.2f}  p90 {hi:.2f}  "
              f"median |limit error| {err:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
