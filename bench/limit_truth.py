"""Does `capplan limit` find the steady-state limit? Measured against queueing truth.

For each case, starts a test server with c request slots and known service times
(testkit/slot_server.py), runs `capplan limit --dimension rate` on it with default
settings (the first level at half the server's capacity), and computes the truth from the
service times the server logged during that run: an M/G/c FCFS queue under Poisson
arrivals, simulated (200k arrivals), or Erlang-B for the server that refuses beyond N active
requests (refusals count as misses, so a p95 SLO allows 5 % refused). Prints truth,
measured, ratio and wall time per case. Acceptance: within 10 % and never more than 5 %
above the truth.

    .venv/bin/python bench/limit_truth.py [--case short --case refusing --case long]
        [--method fast]

`--method fast` runs `capplan limit --method fast` (issue 28: characterise, predict,
confirm, correct); its target is the measured search's wall time divided by three.

Cases: short (8 slots, ~0.7 s requests, ttft:p95<=0.5s), long (32 slots, ~10 s requests,
ttft:p95<=2s; each level needs minutes), refusing (429 above 6 active, 0.76 s requests,
ttft:p95<=1s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.limit_truth import CASES, run_case  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    ap.add_argument("--out", type=Path, default=None, help="keep run directories here")
    ap.add_argument("--verbose", action="store_true", help="print capplan's output")
    ap.add_argument("--timeout", type=float, default=3 * 3600.0, help="per case, seconds")
    ap.add_argument("--method", choices=["measured", "fast"], default="measured")
    args = ap.parse_args()
    extra = ("--method", args.method)
    names = args.case or ["short", "refusing", "long"]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        results = []
        for name in names:
            result = run_case(CASES[name], root / name, extra_args=extra, timeout_s=args.timeout)
            if args.verbose:
                print(result.output)
            print(result.line(), flush=True)
            results.append(result)
    print()
    print(f"{'case':10} {'truth req/s':>12} {'measured':>9} {'ratio':>6} {'wall s':>7}  verdict")
    for r in results:
        measured = "none" if r.measured_rps is None else f"{r.measured_rps:.3g}"
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.3f}"
        ok = r.ratio is not None and 0.90 <= r.ratio <= 1.05
        verdict = "ok" if ok else "OFF"
        truth = f"{r.truth_rps:.3g}"
        print(f"{r.case.name:10} {truth:>12} {measured:>9} {ratio:>6} {r.wall_s:7.0f}  {verdict}")


if __name__ == "__main__":
    main()
