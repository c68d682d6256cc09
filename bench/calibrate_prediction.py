"""Does a `capplan calibrate` calibration predict a real engine's limit? llama.cpp on this CPU.

    python bench/calibrate_prediction.py [--runs 3] [--out DIR] [--result FILE.json]

Each run:
1. builds the random tiny Llama of testkit/real_engine.py and serves it with llama.cpp
   (xllamacpp, SLOTS slots, 1 thread, continuous batching);
2. calibrates the engine model to it with `capplan calibrate` (a catalog of nominal
   `this-cpu` figures and the `tiny-llama` shape, testkit/cpu_catalog.py; the
   calibration fits what share of them the server reaches) -- no preset is involved;
3. measures the limit of two presets with `capplan limit --dimension rate` (those of
   bench/real_engine_prediction.py: A, short prompts and long answers, decode-bound; B,
   long prompts and short answers, prefill-bound);
4. predicts both limits with the calibrated engine model in virtual time under the same
   search and steady-state rules (planner.limit.predict.predict_limit). The load generator's
   prompts are prose of the asked length, which this model's tokenizer counts longer: each
   preset's prompt lengths are mapped to the server's count with a line through its own
   records' `input_tokens` (a property of the text, not of the server's speed);
5. prints predicted, measured, their ratio and the drift the calibration measured.
Target: every ratio within 20 %, in every run. About 10 minutes a run on two shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.real_engine_prediction import (  # noqa: E402
    LEVEL,
    PRESET_A,
    PRESET_B,
    RULES,
    SLO,
    served_lengths,
    served_profile,
)
from contracts.calibration import CalibrationFile, load_calibration_file  # noqa: E402
from contracts.limit import load_limit  # noqa: E402
from planner.calibrate import calibrated_config  # noqa: E402
from planner.limit.measured.search import SearchConfig  # noqa: E402
from planner.limit.predict import predict_limit  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from profiles.model import load_profile, save_profile  # noqa: E402
from testkit.cpu_catalog import write_cpu_catalog  # noqa: E402
from testkit.profiles import make_profile  # noqa: E402
from testkit.real_engine import LlamaShape, build_random_llama, start_llama_server  # noqa: E402

SLOTS = 4
N_CTX = 8192
PRESETS = {"A": PRESET_A, "B": PRESET_B}
START_RPS = 0.5
# A level past the server's limit queues without end; `capplan limit` would run it for its
# default 900 s before failing it as unstable. Two minutes tell as much here.
MAX_LEVEL_S = 120


def run_limit(url: str, model: str, profile: Path, out: Path) -> None:
    """`capplan limit --dimension rate` of one preset (real_engine_prediction's levels)."""
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "limit", "--host", url,
        "--model", model, "--profile", str(profile), "--slo", SLO, "--dimension", "rate",
        "--start", f"{START_RPS:g}", *LEVEL, "--max-level-duration", str(MAX_LEVEL_S),
        "-o", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def calibrate(url: str, model: str, catalog: Path, out: Path, budget_s: float) -> int:
    """`capplan calibrate` against the server; its exit code (1: refused for drift, or the
    server failed a request)."""
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "calibrate", "--host", url,
        "--model", model, "--engine", "llamacpp", "--gpu", "this-cpu",
        "--catalog", str(catalog), "--budget", f"{budget_s:g}", "-o", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def predicted(cal: CalibrationFile, out: Path, name: str) -> float | None:
    """The calibrated model's limit of preset `name`, lengths as the server counted them."""
    pairs = PRESETS[name]
    line = served_lengths(out / f"limit_{name}", pairs)
    profile = load_profile(served_profile(pairs, line, out / f"served_{name}.json"))
    search = SearchConfig(slo=parse_slo(SLO), start=START_RPS, tolerance=0.05, min_completed=20)
    return predict_limit(profile, calibrated_config(cal), search, RULES).feasible_max


def one_run(out: Path, budget_s: float) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    shape = LlamaShape()
    model = build_random_llama(out / "tiny.gguf", shape)
    catalog = write_cpu_catalog(out / "catalog.yaml", shape, N_CTX, SLOTS)
    server = start_llama_server(
        model, n_parallel=SLOTS, n_ctx=N_CTX, n_threads=1, log_path=out / "llama.log"
    )
    record: dict[str, object] = {"load_average_before": os.getloadavg()}
    try:
        code = calibrate(server.url, server.model, catalog, out / "cal.json", budget_s)
        if code != 0:
            record["refused"] = f"capplan calibrate exited {code}"
            return record
        for name, pairs in PRESETS.items():
            profile = out / f"preset_{name}.json"
            save_profile(make_profile(pairs, rate_rps=5.0), profile)
            run_limit(server.url, server.model, profile, out / f"limit_{name}")
    finally:
        server.stop()
    cal = load_calibration_file(out / "cal.json")
    record["drift"] = cal.drift.model_dump()
    record["held_out"] = cal.held_out.model_dump()
    record["factors"] = {k: f.value for k, f in cal.factors.items()}
    for name in PRESETS:
        measured = load_limit(out / f"limit_{name}").feasible_max
        pred = predicted(cal, out, name)
        ratio = pred / measured if pred and measured else None
        record[name] = {"predicted_rps": pred, "measured_rps": measured, "ratio": ratio}
    record["load_average_after"] = os.getloadavg()
    return record


def report(i: int, record: dict[str, object]) -> None:
    if "refused" in record:
        print(f"run {i}: no calibration ({record['refused']})", flush=True)
        return
    d = record["drift"]
    assert isinstance(d, dict)
    drift = f"drift: median spread {d['median_spread']:.1%}, trend {d['trend']:+.1%}"
    for name in PRESETS:
        r = record[name]
        assert isinstance(r, dict)
        ratio = r["ratio"]
        verdict = "within" if ratio and abs(ratio - 1) <= 0.2 else "NOT within"
        print(
            f"run {i}, preset {name}: predicted {r['predicted_rps']} req/s, measured "
            f"{r['measured_rps']} req/s, ratio {ratio if ratio is None else round(ratio, 3)} "
            f"({verdict} 20 %); {drift}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=90.0, help="capplan calibrate's")
    parser.add_argument("--out", type=Path, default=None, help="work directory (default: temp)")
    parser.add_argument(
        "--result", type=Path, default=ROOT / "bench/results/calibrate_prediction.json"
    )
    args = parser.parse_args()
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="capplan-calibrate-prediction-"))
    print(f"work directory: {out}", flush=True)
    records = []
    for i in range(1, args.runs + 1):
        record = one_run(out / f"run{i}", args.budget_s)
        record["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        records.append(record)
        report(i, record)
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(records, indent=2) + "\n")
    print(f"wrote {args.result}")


if __name__ == "__main__":
    main()
