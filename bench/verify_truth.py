"""`capplan verify` over slot servers behind nginx against the queueing truth: the figures.

`python -m bench.verify_truth [--peak-over-limit 2.9] [--steady-s 30] [--out DIR]` plans from
the M/G/c truth's per-instance limit (`capplan plan --limit <truth>rps`), verifies at N and
with one instance out of nginx's pool, and prints capplan's measured TTFT p95 beside the FCFS
truth of the servers' own logs and the steady-state truth (testkit.verify_truth).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from testkit.verify_truth import SlotFleetCase, run_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steady-s", type=float, default=30.0)
    parser.add_argument("--burst-s", type=float, default=5.0)
    parser.add_argument("--recovery-s", type=float, default=20.0)
    parser.add_argument(
        "--peak-over-limit", type=float, default=SlotFleetCase.peak_over_limit,
        help="the plan's peak as a multiple of the truth's per-instance limit",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="capplan-verify-truth-") as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        result = run_case(
            SlotFleetCase(peak_over_limit=args.peak_over_limit),
            folder,
            (args.steady_s, args.burst_s, args.recovery_s),
        )
        for line in result.lines():
            print(line)
        for m in (result.at_n, result.below):
            print(m.verify.sentence)


if __name__ == "__main__":
    main()
