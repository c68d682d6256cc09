"""How close is the engine model to real engines on real GPUs? Every published figure it can
represent, predicted and compared.

    python bench/engine_published.py [TABLE.csv ...] [--json FILE] [--fit] [--max-requests N]

TABLE: published tables in the format of `../shared/data/engine_published/published.csv`
(per-request length files beside them); default: that table and
`bench/data/engine_published/trtllm_v014.csv` (more rows of the same TensorRT-LLM source:
70B at tp 1-8, FP8, online serving) and `bench/data/engine_published/trtllm_l40s.csv` (its
L40S FP8 rows at 0.14, 0.15 and 0.17: 8B/Mistral-7B at tp 1, 70B at tp 4 and 8 over PCIe).
For each row it builds the engine, GPU, precision and workload the source describes
(testkit/published.py), runs the engine model in virtual time and prints published,
predicted and error (predicted / published - 1); then per metric the median and worst
|error| over the rows NOT used for fitting, and the rows it cannot represent, with the
reason. `--json FILE` writes one record per row: the row's fields,
`role` (fit or check), `predicted` and `error`, or `why_not`.

Fitting (`--fit`) is kept apart from checking: each factor in FITS is fitted on the one row
it names (its role is `fit`), every other row is a check. The fitted factors go to
planner/engine/efficiency.yaml with the rows they came from; H200 takes H100's factors (the
same GH100 die; its own bandwidth and memory from the catalog), so every H200 row is a check.
A run takes about 10 minutes on two cores (`--max-requests 1000` for a quicker, rougher one).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engine import simulate  # noqa: E402
from planner.engine.build import EFFICIENCY_PATH, _fitted_table  # noqa: E402
from testkit.published import Row, metric_value, read_table, scenario  # noqa: E402
from testkit.published_fits import FITS, Fit  # noqa: E402

SHARED_TABLE = ROOT.parent / "shared/data/engine_published/published.csv"
OWN_TABLE = ROOT / "bench/data/engine_published/trtllm_v014.csv"
L40S_TABLE = ROOT / "bench/data/engine_published/trtllm_l40s.csv"
GROUPS = {
    "throughput": ("output tok/s", "200 ShareGPT req/s"),
    "TPOT/ITL": ("TPOT p50 ms", "TPOT mean ms", "ITL mean ms", "batch-8 32->128 latency ms"),
    "TTFT": ("TTFT p50 ms", "TTFT p99 ms", "TTFT mean ms"),
}


# The H200 has the H100's compute die: it takes the H100's compute factors and has its own
# bandwidth factor (mbu), fitted on an H200 row. All-reduces are priced by NCCL's own cost
# model over each board's NVLink (planner/engine/parallel.py), nothing of it fitted; the
# per-GPU rate kept per doubling of the group (tp_shard_efficiency) is fitted on one H100 tp4
# row and the A100, H200 and L40S take it, an assumption their tensor-parallel rows check.
# The L40S has no NVLink: its all-reduces cross PCIe (NCCL's PCIe latencies), and the share of
# the PCIe bus bandwidth they reach (tp_link_efficiency) is fitted on one L40S tp4 row; its
# other tp4 rows and all its tp8 rows check it.
#
# Boards with no published row of their own take the fitted factors of their die (H100 PCIe,
# H100 NVL and H200 NVL: the H100's; the A100 PCIe: the A100's) and, over PCIe, the L40S's
# share of the PCIe bus (tp_link_efficiency). Nothing checks these: they are assumptions,
# each board's peaks, memory and links its own (catalog.yaml).
_HOPPER = ("mfu", "mbu", "fp8_efficiency", "tp_shard_efficiency")
INHERIT: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "H200-141GB": [("H100-80GB", ("mfu", "fp8_efficiency", "tp_shard_efficiency"))],
    "A100-80GB": [("H100-80GB", ("tp_shard_efficiency",))],
    "L40S-48GB": [("H100-80GB", ("tp_shard_efficiency",))],
    "H100-PCIe-80GB": [("H100-80GB", _HOPPER), ("L40S-48GB", ("tp_link_efficiency",))],
    "H100-NVL-94GB": [("H100-80GB", _HOPPER)],
    "H200-NVL-141GB": [("H100-80GB", _HOPPER)],
    "A100-PCIe-80GB": [
        ("A100-80GB", ("mfu", "mbu")),
        ("H100-80GB", ("tp_shard_efficiency",)),
        ("L40S-48GB", ("tp_link_efficiency",)),
    ],
}


def _profile(row: Row, folder: Path) -> str | None:
    sc = scenario(row, folder, max_requests=1)
    return sc.config.engine if sc.config else None


class Model:
    """Runs rows through the engine model; one simulation per distinct scenario."""

    def __init__(self, folder_of: dict[int, Path], max_requests: int | None) -> None:
        self._folder_of = folder_of
        self._max = max_requests
        self._cache: dict[str, Any] = {}
        self.simulations = 0

    def predict(self, row: Row, factors: dict[str, Any]) -> tuple[float | None, str | None]:
        sc = scenario(row, self._folder_of[row.index], factors, self._max)
        if sc.config is None:
            return None, sc.why_not
        key = repr((sc.config, [(r.prompt_tokens, r.max_tokens, r.arrival_s) for r in sc.requests]))
        if key not in self._cache:
            self._cache[key] = simulate(list(sc.requests), sc.config)
            self.simulations += 1
        return metric_value(row.metric, self._cache[key]), None


def factors_for(
    row: Row, table: dict[str, dict[str, dict[str, float]]], engine: str | None
) -> dict[str, float]:
    """The fitted factors that apply to `row`: its GPU's (over those of the GPU it inherits
    from) and its engine profile's."""
    gpus = table.get("gpus", {})
    inherited = {k: v for k, (v, _) in inherited_factors(row.gpu, gpus).items()}
    gpu = {**inherited, **gpus.get(row.gpu, {})}
    eng = table.get("engines", {}).get(engine or "", {})
    return {**gpu, **eng}


def inherited_factors(gpu: str, own: dict[str, dict[str, float]]) -> dict[str, tuple[float, str]]:
    """The factors `gpu` takes from the boards INHERIT names (a later parent's over an
    earlier's), each with the board it came from; `own` holds every board's fitted factors."""
    return {
        k: (v, parent)
        for parent, fields in INHERIT.get(gpu, [])
        for k, v in own.get(parent, {}).items()
        if k in fields
    }


def fit(
    rows: list[Row], model: Model, folders: dict[int, Path], only: str | None = None
) -> dict[str, Any]:
    """Each factor of FITS on its row, in turn, three rounds (the factors interact). With
    `only` (a regular expression over factor labels), only those factors, one round, the
    others kept as efficiency.yaml holds them (for a factor whose row no other factor's row
    depends on, such as a tensor-parallel factor: every other fit row is tp 1)."""
    table: dict[str, dict[str, dict[str, float]]] = {"gpus": {}, "engines": {}}
    fitted_on: dict[str, str] = {}
    fits = list(FITS)
    if only is not None:
        table, fitted_on = _current_table()
        fits = [f for f in FITS if re.search(only, f.label)]
    engines = {r.index: _profile(r, folders[r.index]) for r in rows}
    for round_ in range(3 if only is None else 1):
        for f in fits:
            row = next(r for r in rows if f.matches(r))
            fitted_on[f.label] = row.key

            def error(x: float, f: Fit = f, row: Row = row) -> float:
                table[f.section].setdefault(f.name, {})[f.field] = x
                got, _ = model.predict(row, factors_for(row, table, engines[row.index]))
                assert got is not None, row.key
                return math.log(got / row.published)

            x = _solve(error, f.low, f.high)
            table[f.section][f.name][f.field] = x
            print(f"  round {round_ + 1}: {f.label} = {x:.4g}  (on {row.key})", flush=True)
    return {"table": table, "fitted_on": fitted_on}


def _current_table() -> tuple[dict[str, Any], dict[str, str]]:
    """efficiency.yaml as a fit table (own factors only) and the rows each was fitted on."""
    table: dict[str, Any] = {"gpus": {}, "engines": {}}
    fitted_on: dict[str, str] = {}
    for section, entries in _fitted_table().items():
        for name, fields in entries.items():
            for k, v in fields.items():
                if k == "fitted_on":
                    continue
                origin = fields.get("fitted_on", {}).get(k, "")
                if origin.endswith("'s"):  # inherited: write_efficiency adds it back
                    continue
                table[section].setdefault(name, {})[k] = v
                fitted_on[f"{name} {k}"] = origin
    return table, fitted_on


def _solve(error: Callable[[float], float], low: float, high: float, steps: int = 14) -> float:
    """The x in [low, high] (log scale) where error(x) crosses 0, by bisection; the nearer
    bound when it does not cross."""
    a, b = math.log(low), math.log(high)
    ea, eb = error(low), error(high)
    if ea * eb > 0:
        return low if abs(ea) < abs(eb) else high
    for _ in range(steps):
        m = (a + b) / 2
        em = error(math.exp(m))
        if em * ea > 0:
            a, ea = m, em
        else:
            b = m
    return math.exp((a + b) / 2)


def _predict_group(
    task: tuple[list[Row], dict[int, Path], int | None],
) -> list[tuple[int, tuple[float | None, str | None]]]:
    """Predictions of rows that share a measurement (run in a worker process)."""
    group, folders, max_requests = task
    model = Model(folders, max_requests)
    return [(r.index, model.predict(r, {})) for r in group]


def write_efficiency(fitted: dict[str, Any]) -> None:
    lines = [
        "# Written by `python bench/engine_published.py --fit`: each factor fitted on the one",
        "# published row named after it (rows listed in that bench as FITS); all other rows",
        "# of the tables are checks. H200 uses H100's factors (same die); A100 and L40S its",
        "# tp_shard_efficiency; boards with no published row their die's (bench's INHERIT).",
        "# Do not edit by hand.",
    ]
    doc: dict[str, Any] = {}
    table = fitted["table"]
    own_table = {name: dict(fields) for name, fields in table["gpus"].items()}
    for child in INHERIT:
        own = own_table.get(child, {})
        inherited = {k: vp for k, vp in inherited_factors(child, own_table).items() if k not in own}
        for k, (_, parent) in inherited.items():
            fitted["fitted_on"][f"{child} {k}"] = f"{parent}'s"
        table["gpus"][child] = {**{k: v for k, (v, _) in inherited.items()}, **own}
    for section, entries in table.items():
        doc[section] = {}
        for name, fields in entries.items():
            doc[section][name] = {k: float(f"{v:.4g}") for k, v in fields.items()}
            for k in fields:
                doc[section][name].setdefault("fitted_on", {})[k] = fitted["fitted_on"][
                    f"{name} {k}"
                ]
    EFFICIENCY_PATH.write_text("\n".join(lines) + "\n" + yaml.safe_dump(doc, sort_keys=False))


# Slices of the check rows the README reports apart.
SLICES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "Llama-3.1-8B": lambda r: r["model"] == "llama-3.1-8b",
    "Llama-3.1-70B": lambda r: r["model"] == "llama-3.1-70b",
    "vLLM": lambda r: r["engine"].startswith("vLLM"),
    "TensorRT-LLM offline (H100/H200/A100)": lambda r: (
        r["engine"] == "TensorRT-LLM 0.14" and r["gpu"] != "L40S-48GB"
    ),
    "TensorRT-LLM online": lambda r: "Triton" in r["engine"],
    "L40S (TensorRT-LLM 0.14-0.17, FP8)": lambda r: r["gpu"] == "L40S-48GB",
    "L40S tp 1": lambda r: r["gpu"] == "L40S-48GB" and r["tp"] == 1,
    "TP over PCIe (L40S tp 4, 8)": lambda r: r["gpu"] == "L40S-48GB" and r["tp"] > 1,
    "TP over PCIe, tp 4": lambda r: r["gpu"] == "L40S-48GB" and r["tp"] == 4,
    "TP over PCIe, tp 8": lambda r: r["gpu"] == "L40S-48GB" and r["tp"] == 8,
}


def _summary(records: list[dict[str, Any]], role: str) -> list[str]:
    out = []
    for group, metrics in GROUPS.items():
        errs = np.array(
            [abs(r["error"]) for r in records
             if r.get("error") is not None and r["metric"] in metrics and r["role"] == role]
        )  # fmt: skip
        if len(errs):
            out.append(
                f"  {group:<10} {len(errs):>4} rows  median |error| {np.median(errs):6.1%}  "
                f"worst {errs.max():6.1%}  within 20 %: {np.mean(errs <= 0.2):4.0%}  "
                f"beyond 35 %: {int(np.sum(errs > 0.35))}"
            )
    return out


def write_markdown(path: Path, records: list[dict[str, Any]], header: list[str]) -> None:
    """Every row as a table: figure, source, published, predicted, error, role."""
    refs: dict[str, int] = {}
    lines = [*header, "", "| # | figure | published | predicted | error | role | source |",
             "|---:|---|---:|---:|---:|---|---|"]  # fmt: skip
    for i, r in enumerate(records, 1):
        ref = refs.setdefault(r["reference"], len(refs) + 1)
        key = (f"{r['engine']}, {r['gpu']} {r['precision']} {r['model']} tp{r['tp']}, "
               f"{r['workload']}: {r['metric']}")  # fmt: skip
        if "why_not" in r:
            lines.append(
                f"| {i} | {key} | {r['published']:.4g} | - | - | {r['why_not']} | [{ref}] |"
            )
            continue
        lines.append(
            f"| {i} | {key} | {r['published']:.4g} | {r['predicted']:.4g} | "
            f"{r['error']:+.1%} | {r['role']} | [{ref}] |"
        )
    lines += ["", "Sources:", ""] + [f"[{n}] {ref}  " for ref, n in refs.items()]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="*", type=Path, help="published tables (CSV)")
    ap.add_argument("--json", type=Path, help="write one record per row here")
    ap.add_argument("--fit", action="store_true", help="refit efficiency.yaml first")
    ap.add_argument(
        "--fit-only", help="with --fit: refit only the factors whose label matches (one round)"
    )
    ap.add_argument(
        "--max-requests",
        type=int,
        default=1000,
        help="cap each workload's request count (default 1000; 0: as published)",
    )
    ap.add_argument("--only", help="regular expression over row keys")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the check")
    ap.add_argument("--markdown", type=Path, help="write every row as a Markdown table here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    tables = args.tables or [SHARED_TABLE, OWN_TABLE, L40S_TABLE]
    rows: list[Row] = []
    folders: dict[int, Path] = {}
    for path in tables:
        for r in read_table(path):
            r = Row(**{**r.__dict__, "index": len(rows)})
            rows.append(r)
            folders[r.index] = path.parent
    args.max_requests = args.max_requests or None
    model = Model(folders, args.max_requests)
    if args.fit:
        print("fitting (FITS):")
        fitted = fit(rows, model, folders, args.fit_only)
        write_efficiency(fitted)
        _fitted_table.cache_clear()
        print(f"  wrote {EFFICIENCY_PATH.relative_to(ROOT)}")
    fit_rows = {r.index for r in rows for f in FITS if f.matches(r)}
    records: list[dict[str, Any]] = []
    if args.only:
        rows = [r for r in rows if re.search(args.only, r.key)]
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:  # rows of one measurement share one simulation
        groups.setdefault((r.source, r.engine, r.gpu, r.precision, r.model, r.tp, r.workload), [])
        groups[(r.source, r.engine, r.gpu, r.precision, r.model, r.tp, r.workload)].append(r)
    tasks = [(g, folders, args.max_requests) for g in groups.values()]
    with multiprocessing.Pool(args.jobs) as pool:
        results = dict(x for part in pool.imap(_predict_group, tasks) for x in part)
    print(f"{'row':<100} {'published':>10} {'predicted':>10} {'error':>7}  role")
    for r in rows:
        role = "fit" if r.index in fit_rows else "check"
        got, why = results[r.index]
        rec = {**r.fields(), "role": role}
        if got is None:
            rec["why_not"] = why
        else:
            rec["predicted"] = got
            rec["error"] = got / r.published - 1
            print(f"{r.key[:100]:<100} {r.published:>10.4g} {got:>10.4g} {rec['error']:>+7.1%}  "
                  f"{role}", flush=True)  # fmt: skip
        records.append(rec)
    summary = [
        "error on rows not used for fitting (check):",
        *_summary(records, "check"),
        *(
            line
            for name, keep in SLICES.items()
            for line in [f" {name}:", *_summary([r for r in records if keep(r)], "check")]
        ),
        "error on the fitting rows (fit; not evidence):",
        *_summary(records, "fit"),
    ]
    print("\n" + "\n".join(summary))
    missing = [rec for rec in records if "why_not" in rec]
    if missing:
        print(f"\n{len(missing)} rows not represented:")
        for m in missing:
            print(f"  {m['source']} {m['gpu']} {m['workload']} {m['metric']}: {m['why_not']}")
    print(f"\n{len(records)} rows, {len(groups)} measurements simulated, "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    if args.markdown:
        cap = f"capped at {args.max_requests} requests" if args.max_requests else "as published"
        header = [
            "# The engine model against published figures",
            "",
            f"Written by `python bench/engine_published.py --markdown` (workloads {cap}).",
            "`fit` rows were used to fit one factor each (planner/engine/efficiency.yaml); ",
            "every `check` row is evidence. error = predicted / published - 1.",
            "",
            "```",
            *summary,
            "```",
        ]
        write_markdown(args.markdown, records, header)


if __name__ == "__main__":
    main()
