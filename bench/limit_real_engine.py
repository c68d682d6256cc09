"""Does the fast limit search land within the band of a long measured search on a real engine?

    python bench/limit_real_engine.py [--out DIR] [--result FILE.json]
        [--order fast,measured]   # or calibrated (and any mix: calibrated,fast,measured)
        [--measured-from-fast] [--reference RPS] [--shape tiny|small] [--slo SLO] [--pin]

llama.cpp (xllamacpp, the random tiny Llama of bench/kit/real_engine.py, 4 slots, 1
thread, continuous batching) serves preset A of bench/real_engine_prediction.py (short
prompts, 48-80-token answers) at `e2e:p95<=4s`. On the same server, one after the other:
`capplan limit --method fast` (slots characterised in closed loop), `calibrated` (`capplan
calibrate` first, then `capplan limit --method fast --calibration cal.json`: the engine
model predicts) and `capplan limit` (the measured search) with their default level rules,
each from 0.5 req/s (`--measured-from-fast`: the measured search from the answer of the
search before it, bracketing and narrowing by its own verdicts). A real engine has no
computed truth: the long measured search is the reference (issue 28: the fast answer within
[0.90, 1.05] of it); `--reference RPS` gives a measured answer from an earlier run instead
of measuring again. Prints the answers, their intervals or brackets, wall times and ratios;
writes them as JSON. Needs a quiet machine: the server, Locust and capplan share the
cores. `--pin` gives the server the last core and the rest to this script, capplan and
Locust (on two cores the tiny Llama's HTTP threads then share its one core with its
compute); `--shape small` serves a Llama whose compute dominates its step.
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

from bench.calibrate_prediction import N_CTX, calibrate  # noqa: E402
from bench.kit.cpu_catalog import write_cpu_catalog  # noqa: E402
from bench.kit.profiles import make_profile  # noqa: E402
from bench.kit.real_engine import LlamaShape, build_random_llama, start_llama_server  # noqa: E402
from bench.real_engine_prediction import PRESET_A, SLO  # noqa: E402
from contracts.limit import load_limit  # noqa: E402
from profiles.model import save_profile  # noqa: E402

SLOTS = 4
START_RPS = 0.5
# --shape: the tiny Llama, whose step costs about as much as serving its stream over HTTP
# (its closed-loop steps on this machine, requests in 11 s from run to run: 1 user 142-235
# and 4 users 165-202 on shared cores, 307-340 and 247-360 with --pin), or one whose compute
# dominates (768 wide, 8 layers, --pin: 1 user 21, 4 users 25)
SHAPES = {
    "tiny": LlamaShape(),
    "small": LlamaShape(hidden=768, layers=8, heads=8, kv_heads=8, ffn=2048),
}


def run_limit(
    url: str, model: str, profile: Path, out: Path, method: str, cal: Path | None = None,
    start_rps: float = START_RPS, slo: str = SLO,
) -> dict[str, object]:  # fmt: skip
    """One `capplan limit --method METHOD` run with default level rules; its account."""
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "limit", "--host", url,
        "--model", model, "--profile", str(profile), "--slo", slo, "--dimension", "rate",
        "--start", f"{start_rps:.4g}", "--method", method, "-o", str(out),
        *(["--calibration", str(cal)] if cal else []),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    started = time.perf_counter()
    log = out.with_suffix(".log")  # its progress lines as they come (tail -f)
    with open(log, "w") as stream:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=stream, stderr=subprocess.STDOUT, text=True)
    wall_s = time.perf_counter() - started
    print(log.read_text()[-4000:], flush=True)
    limit = load_limit(out)
    fast = limit.fast
    return {
        "method": method + (" --calibration" if cal else ""),
        "exit_code": proc.returncode,
        "wall_s": round(wall_s, 1),
        "feasible_max": limit.feasible_max,
        "infeasible_min": limit.infeasible_min,
        "levels": len(limit.levels),
        "fast_stopped": fast.stopped if fast else None,
        "fast_adequate": fast.adequate if fast else None,
        "fast_interval": list(fast.interval) if fast and fast.interval else None,
        "fast_predicted": fast.predicted_rps if fast else None,
        "fast_model": fast.model if fast else None,
        "fast_s": round(fast.characterise_s + fast.confirm_s, 1) if fast else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=None, help="work directory (default: temp)")
    ap.add_argument("--result", type=Path, default=ROOT / "bench/results/limit_real_engine.json")
    ap.add_argument("--order", default="fast,measured", help="which searches, in order")
    ap.add_argument(
        "--reference",
        type=float,
        default=None,
        help="the long measured search's answer from an earlier run (req/s)",
    )
    ap.add_argument(
        "--measured-from-fast",
        action="store_true",
        help="start the measured search at the previous search's answer, not at "
        f"{START_RPS:g} req/s (it brackets and narrows from there by its own verdicts; from "
        "0.5 req/s its first levels take most of an hour on this server)",
    )
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny", help="the model served")
    ap.add_argument("--slo", default=SLO, help=f"the SLO of the searches (default {SLO})")
    ap.add_argument("--pin", action="store_true", help="give the server a core of its own")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    server_cpus = None
    if args.pin and len(cores) >= 2:
        server_cpus = {cores[-1]}
        os.sched_setaffinity(0, set(cores[:-1]))  # capplan and Locust inherit it
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        shape = SHAPES[args.shape]
        model = build_random_llama(out / "tiny.gguf", shape)
        profile = out / "preset_A.json"
        save_profile(make_profile(PRESET_A, rate_rps=5.0), profile)
        server = start_llama_server(
            model,
            n_parallel=SLOTS,
            n_ctx=N_CTX,
            n_threads=1,
            log_path=out / "llama.log",
            cpus=server_cpus,
        )
        runs: dict[str, dict[str, object]] = {}
        load_before = os.getloadavg()
        try:
            for name in args.order.split(","):
                cal = None
                if name == "calibrated":
                    catalog = write_cpu_catalog(out / "catalog.yaml", shape, N_CTX, SLOTS)
                    cal = out / "cal.json"
                    started = time.perf_counter()
                    if calibrate(server.url, server.model, catalog, cal, 90.0) != 0:
                        runs[name] = {"refused": "capplan calibrate refused (drift or errors)"}
                        continue
                    calibrate_s = round(time.perf_counter() - started, 1)
                method = "measured" if name == "measured" else "fast"
                start = START_RPS
                answered = [r["feasible_max"] for r in runs.values() if r.get("feasible_max")]
                if method == "measured" and args.measured_from_fast and answered:
                    start = float(answered[-1])  # type: ignore[arg-type]
                runs[name] = run_limit(
                    server.url, server.model, profile, out / name, method, cal, start, args.slo
                )
                runs[name]["start_rps"] = start
                if cal:
                    runs[name]["calibrate_wall_s"] = calibrate_s
        finally:
            server.stop()
    measured = runs.get("measured")
    reference = args.reference or (measured or {}).get("feasible_max")
    ratios: dict[str, float] = {}
    for name, run in runs.items():
        if "refused" in run:
            print(f"{name:10} {run['refused']}")
            continue
        print(f"{name:10} {run['feasible_max']} req/s (fails at {run['infeasible_min']}), "
              f"{run['wall_s']:.0f} s, {run['levels']} levels"
              + (f", {run['fast_stopped']}" if run["fast_stopped"] else ""))  # fmt: skip
        if name != "measured" and reference and run["feasible_max"]:
            ratios[name] = float(run["feasible_max"]) / float(reference)  # type: ignore[arg-type]
            verdict = "within" if 0.90 <= ratios[name] <= 1.05 else "OUTSIDE"
            print(f"{name} / measured ({reference:g}): {ratios[name]:.3f} ({verdict} [0.90, 1.05])")
    record = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": subprocess.run(
            ["git", "log", "-1", "--format=%h: %s"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()[:120],  # fmt: skip
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "slots": SLOTS,
        "server_cpus": sorted(server_cpus) if server_cpus else None,
        "slo": args.slo,
        "shape": args.shape,
        "runs": runs,
        "reference_rps": reference,
        "reference_given": args.reference is not None,
        "ratios": ratios,
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.result.read_text()) if args.result.exists() else []
    args.result.write_text(json.dumps([*previous, record], indent=1) + "\n")


if __name__ == "__main__":
    main()
