"""How long must the slot model's run be for the root of its miss curve to sit on the truth?

    python bench/curve_length.py [--case c16-cv0.2-loose] [--requests 60000,200000] [--seeds 6]

The model with the simulated server's own parameters (testkit/fast_truth.py's grid: 50 ms
to the first token, 10 ms a token), so only the run's length is in question: per seed, 20,000
answer lengths drawn from the case's distribution, a `MissCurve` of N requests and its root.
Prints the roots' mean, spread and ratio to the M/G/c truth of a million arrivals
(`fast_truth.truth`), per length. On a steep curve a short run's miss shares come out low
(it mostly misses the rare long busy periods), so its root sits above the truth; this is why
`FastConfig.root_requests` is 200,000.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.limit.fast.misses import MissCurve, targets  # noqa: E402
from planner.limit.fast.model import ServerModel  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from testkit import fast_truth  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--case", default="c16-cv0.2-loose")
    ap.add_argument("--requests", default="60000,200000", help="run lengths, comma-separated")
    ap.add_argument("--seeds", type=int, default=6)
    args = ap.parse_args()
    case = {c.name: c for c in fast_truth.grid_cases()}[args.case]
    spec = case.spec
    model = ServerModel(spec.slots, (spec.prefill_s, 0.0), (spec.per_token_s, spec.per_token_s),
                        (1.0,) * spec.slots)  # fmt: skip
    slo = parse_slo(case.slo)
    truth = fast_truth.truth(case)
    print(f"{case.name}: truth {truth:.4g} req/s")
    for requests in (int(n) for n in args.requests.split(",")):
        started = time.perf_counter()
        roots = []
        for seed in range(args.seeds):
            outputs = spec.draw_tokens(np.random.default_rng([seed, 29]), 20_000).astype(float)
            prompts = np.full(outputs.size, 100.0)
            curve = MissCurve(model=model, input_tokens=prompts, output_tokens=outputs,
                              slo=slo, requests=requests, seed=seed)  # fmt: skip
            roots.append(curve.root(np.zeros(len(targets(slo)))))
        r = np.array(roots)
        print(f"{requests:>9} requests: mean {r.mean():.4g} req/s ({r.mean() / truth:.4f} of "
              f"the truth), sd {100 * r.std(ddof=1) / r.mean():.1f} %, {args.seeds} seeds, "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
