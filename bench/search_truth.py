"""Does the limit search land on the steady-state truth? Many searches, in virtual time.

`bench/limit_truth.py` runs `capplan limit` once per case against the real slot server: one
draw of a noisy measurement. This runs the same search and steady-state rules
(planner.limit.measured.search, planner.limit.measured.steady) against a simulated copy of each
slot server (testkit/slot_probe.py), over many seeds, and prints how the found limit spreads around
the truth (testkit/queue_truth.py: M/G/c under Poisson arrivals, or Erlang-B for the refusing
server) and how long the levels would have taken in wall-clock time. Acceptance (issue 10): within
10 % of the truth and never more than 5 % above it.

    .venv/bin/python bench/search_truth.py [--case short|long|refusing ...] [--seeds 20]
        [--rules previous]

`--rules previous`: the rules before correlation times (3 + 5 mean E2Es of warm-up and
window, 100 requests, levels up to 300 s, any pass counts, 2 repeats of a deciding level,
95 % intervals), for comparison. `--max-repeats` and `--confidence` override the search's.

`--method fast` (issue 28) runs the fast search (planner.limit.fast: characterise, predict,
confirm on warm levels, correct the model by its own error) and today's measured search on
the same seeds against a simulated server written apart from the model
(testkit/sim_server.py), and prints per case: the median ratio to the truth, the 95th
percentile of |error|, the share of seeds more than 5 % above the truth, the interval's
coverage of the truth, the median minutes of load, and the runs that fell back to the
measured search ("model inadequate"). Acceptance: p95 |error| <= 5 %, > 1.05 in at most 5 %
of seeds, coverage >= 90 %, median time at most a third of the measured search's.

    .venv/bin/python bench/search_truth.py --method fast [--seeds 20] [--grid]
        [--misspecified] [--ablations] [--no-measured]

`--method default` runs what `capplan limit` runs by default (issue 47): the fast search,
then the measured levels at 0.9 and 1.1 of its answer (planner.limit.fast.result.seeded),
and the measured search going on from there where they do not hold the answer between them
(its `fall` column counts those runs), beside the measured search from half the capacity.

    .venv/bin/python bench/search_truth.py --method default [--seeds 5] [--misspecified]

`--grid`: slot counts 4 and 16 x answer-length CV 0.2, 1, 2 x a tight and a loose TTFT
threshold; `--misspecified`: servers the model does not describe (service slowing with
load, prefill contention, a slot count misstated by +/-25 %); `--ablations`: the model
alone, the measured search shortened to the fast one's time, no warm start, no correction,
the model sized by the answers the server returned (not by the sizes the driver draws).
With `--method fast`, `--case` keeps only the named cases of those chosen (for example
`--misspecified --case slots-25%`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.limit.measured.steady import SteadyRules  # noqa: E402
from testkit import fast_truth  # noqa: E402
from testkit.limit_truth import CASES  # noqa: E402
from testkit.search_cases import queue_of, truth_of  # noqa: E402
from testkit.slot_probe import search_slot_queue  # noqa: E402

PREVIOUS = SteadyRules(
    warmup_e2es=3.0, max_level_s=300.0, effective_requests=0.0, tail_requests=0.0, warmup_taus=0.0
)
PREVIOUS_SEARCH: dict[str, object] = {
    "certain_pass": False,
    "correlated_blocks": False,
    "max_repeats": 2,
    "max_pooled_s": None,
    "confidence": 0.95,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--case", action="append", help="default: all (short, refusing, long)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--rules", choices=["default", "previous"], default="default")
    ap.add_argument("--max-repeats", type=int, help="the search's repeats of a deciding level")
    ap.add_argument("--confidence", type=float, help="of the search's bootstrap intervals")
    ap.add_argument("--method", choices=["measured", "fast", "default"], default="measured")
    ap.add_argument("--grid", action="store_true", help="with --method fast")
    ap.add_argument("--misspecified", action="store_true", help="with --method fast")
    ap.add_argument("--ablations", action="store_true", help="with --method fast")
    ap.add_argument("--no-measured", action="store_true", help="skip today's search")
    args = ap.parse_args()
    if args.method in ("fast", "default"):
        fast_main(args)
        return
    unknown = sorted(set(args.case or []) - set(CASES))
    if unknown:
        ap.error(f"unknown case {', '.join(unknown)}; known: {', '.join(sorted(CASES))}")
    rows = []
    for name in args.case or ["short", "refusing", "long"]:
        case = CASES[name]
        queue = queue_of(case)
        truth = truth_of(case, queue)
        ratios, walls = [], []
        started = time.perf_counter()
        for seed in range(args.seeds):
            previous = args.rules == "previous"
            search = dict(PREVIOUS_SEARCH) if previous else {}
            if args.max_repeats is not None:
                search["max_repeats"] = args.max_repeats
            if args.confidence is not None:
                search["confidence"] = args.confidence
            found, wall_s = search_slot_queue(
                queue,
                case.slo,
                start_rps=case.start_rps,
                seed=seed,
                rules=PREVIOUS if previous else None,
                search=search,
            )
            ratios.append((found or 0.0) / truth)
            walls.append(wall_s)
            print(f"{name} seed {seed:2d}: {found} req/s, ratio {ratios[-1]:.3f}, "
                  f"levels {wall_s / 60:.1f} min", flush=True)  # fmt: skip
        r = np.array(ratios)
        rows.append((name, truth, r, float(np.mean(walls)), time.perf_counter() - started))
    print()
    print(f"{'case':9} {'truth':>6} {'median':>7} {'min':>6} {'max':>6} {'>1.05':>6} "
          f"{'<0.90':>6} {'levels min':>10} {'cpu s':>6}")  # fmt: skip
    for name, truth, r, wall, cpu in rows:
        high, low = (r > 1.05).mean(), (r < 0.90).mean()
        print(f"{name:9} {truth:6.3g} {np.median(r):7.3f} {r.min():6.3f} {r.max():6.3f} "
              f"{high:6.0%} {low:6.0%} {wall / 60:10.1f} {cpu:6.0f}")  # fmt: skip


def fast_main(args: argparse.Namespace) -> None:
    cases = fast_truth.truth_cases()
    if args.grid:
        cases += fast_truth.grid_cases()
    if args.misspecified:
        cases += fast_truth.misspecified_cases()
    names = set(args.case or [])
    unknown = sorted(names - {c.name for c in cases})
    if unknown:
        known = ", ".join(c.name for c in cases)
        raise SystemExit(f"unknown case {', '.join(unknown)}; known here: {known}")
    cases = [c for c in cases if not names or c.name in names]
    seeds = range(args.seeds)
    lines: list[str] = []
    started = time.perf_counter()
    for case in cases:
        truth = fast_truth.truth(case)
        print(f"{case.name}: truth {truth:.4g} req/s", flush=True)
        rows: list[tuple[str, fast_truth.Tally]] = []
        if args.method == "default":
            fast = fast_truth.default_tally(case, seeds, truth, print)
        else:
            fast = fast_truth.fast_tally(case, seeds, "fast", truth, print)
        rows.append((args.method, fast))
        misspecified = not case.plain or case.slots_error != 1.0
        if not args.no_measured and not misspecified:
            rows.append(("measured", fast_truth.measured_tally(case, seeds, truth, print)))
        if args.ablations:
            for variant in ("model only", "no warm start", "no correction", "measured sizes"):
                rows.append((variant, fast_truth.fast_tally(case, seeds, variant, truth, print)))
            if len(rows) > 1 and rows[1][0] == "measured":
                scale = float(np.median(fast.minutes) / np.median(rows[1][1].minutes))
                short = fast_truth.measured_tally(case, seeds, truth, print, scale=scale)
                rows.append(("measured, same time", short))
        for method, tally in rows:
            lines.append(f"{case.name:22} {truth:7.4g} {method:20} {tally.row()}")
        if len(rows) > 1 and rows[1][0] == "measured":
            ratio = np.median(fast.minutes) / np.median(rows[1][1].minutes)
            lines.append(f"{case.name:22} {'':7} {f'time {args.method}/measured':20} {ratio:6.2f}")
    print()
    print(f"{'case':22} {'truth':>7} {'method':20} {fast_truth.HEADER}")
    for line in lines:
        print(line)
    print(f"\n{len(seeds)} seeds; {time.perf_counter() - started:.0f} s of CPU")


if __name__ == "__main__":
    main()
