"""Does the fast limit search land within the band of a long measured search on a real engine?

    python bench/limit_real_engine.py [--out DIR] [--result FILE.json] [--order fast,measured]

llama.cpp (xllamacpp, the random tiny Llama of bench/kit/real_engine.py, 4 slots, 1
thread, continuous batching) serves preset A of bench/real_engine_prediction.py (short
prompts, 48-80-token answers) at `e2e:p95<=4s`. On the same server, one after the other:
`capplan limit --method fast` and `capplan limit` (the measured search) with their default
level rules, each from 0.5 req/s. A real engine has no computed truth: the long measured
search is the reference (issue 28: the fast answer within [0.90, 1.05] of it). Prints
both answers, their intervals or brackets, wall times and the ratio; writes them as JSON.
Needs a quiet machine: the server, Locust and capplan share the two cores.
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

from bench.kit.profiles import make_profile  # noqa: E402
from bench.kit.real_engine import build_random_llama, start_llama_server  # noqa: E402
from bench.real_engine_prediction import PRESET_A, SLO  # noqa: E402
from contracts.limit import load_limit  # noqa: E402
from profiles.model import save_profile  # noqa: E402

SLOTS = 4
START_RPS = 0.5


def run_limit(url: str, model: str, profile: Path, out: Path, method: str) -> dict[str, object]:
    """One `capplan limit --method METHOD` run with default level rules; its account."""
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "limit", "--host", url,
        "--model", model, "--profile", str(profile), "--slo", SLO, "--dimension", "rate",
        "--start", f"{START_RPS:g}", "--method", method, "-o", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    print(proc.stdout[-3000:], proc.stderr[-2000:], flush=True)
    limit = load_limit(out)
    fast = limit.fast
    return {
        "method": method,
        "exit_code": proc.returncode,
        "wall_s": round(wall_s, 1),
        "feasible_max": limit.feasible_max,
        "infeasible_min": limit.infeasible_min,
        "levels": len(limit.levels),
        "fast_stopped": fast.stopped if fast else None,
        "fast_adequate": fast.adequate if fast else None,
        "fast_interval": list(fast.interval) if fast and fast.interval else None,
        "fast_predicted": fast.predicted_rps if fast else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=None, help="work directory (default: temp)")
    ap.add_argument("--result", type=Path, default=ROOT / "bench/results/limit_real_engine.json")
    ap.add_argument("--order", default="fast,measured", help="which search runs first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        model = build_random_llama(out / "tiny.gguf")
        profile = out / "preset_A.json"
        save_profile(make_profile(PRESET_A, rate_rps=5.0), profile)
        server = start_llama_server(model, n_parallel=SLOTS, log_path=out / "llama.log")
        runs: dict[str, dict[str, object]] = {}
        load_before = os.getloadavg()
        try:
            for method in args.order.split(","):
                runs[method] = run_limit(server.url, server.model, profile, out / method, method)
        finally:
            server.stop()
    fast, measured = runs.get("fast"), runs.get("measured")
    ratio = None
    if fast and measured and fast["feasible_max"] and measured["feasible_max"]:
        ratio = float(fast["feasible_max"]) / float(measured["feasible_max"])  # type: ignore[arg-type]
    for name, run in runs.items():
        print(f"{name:9} {run['feasible_max']} req/s (fails at {run['infeasible_min']}), "
              f"{run['wall_s']:.0f} s, {run['levels']} levels"
              + (f", {run['fast_stopped']}" if run["fast_stopped"] else ""))  # fmt: skip
    if ratio is not None:
        verdict = "within" if 0.90 <= ratio <= 1.05 else "OUTSIDE"
        time_ratio = float(fast["wall_s"]) / float(measured["wall_s"])  # type: ignore[arg-type,index]
        print(f"fast / measured: {ratio:.3f} ({verdict} [0.90, 1.05]); wall {time_ratio:.2f}")
    record = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": subprocess.run(
            ["git", "log", "-1", "--format=%h: %s"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()[:120],  # fmt: skip
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "slots": SLOTS,
        "slo": SLO,
        "runs": runs,
        "ratio": ratio,
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.result.read_text()) if args.result.exists() else []
    args.result.write_text(json.dumps([*previous, record], indent=1) + "\n")


if __name__ == "__main__":
    main()
