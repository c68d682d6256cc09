"""Where the demo's limit truly is: the engine model's long-run limit for the demo's profile.

    python bench/demo_truth.py [--seeds 0,1,2] [--requests 40000] [--runs 2]

`capplan demo` load-tests its emulator, which runs the engine model of its own configuration
(Llama-3.1-8B on an H100) in real time; so the emulator's limit at the demo's SLO
(`ttft:p95<=2s`) is the engine's long-run one, up to what HTTP adds (tens of milliseconds
to a 2-second threshold). For each demo seed (the profile's sampler) this runs the engine
in virtual time over `--requests` Poisson arrivals with sizes drawn from the profile, `--runs`
times with other random numbers, and finds the rate where the share of first tokens past
2 s reaches 5 % (the first tenth of each run left out as warm-up). Ten times the requests
of the fast search's own curve, and other random numbers: the demo's fast answers are
compared with these. Prints each run's limit and their mean per seed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capplan.demo import DEMO_GPU, DEMO_MODEL, DEMO_SLO, SAMPLE  # noqa: E402
from planner.engine import build_engine_config  # noqa: E402
from planner.limit.fast.engine_model import known_engine  # noqa: E402
from planner.limit.fast.misses import MissCurve  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from profiles.build import build_profile  # noqa: E402
from profiles.samples import sample_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seeds", default="0,1,2", help="demo seeds (the profile's sampler)")
    ap.add_argument("--requests", type=int, default=40_000, help="arrivals per run")
    ap.add_argument("--runs", type=int, default=2, help="runs with other random numbers")
    args = ap.parse_args()
    config = build_engine_config(DEMO_GPU, DEMO_MODEL)
    slo = parse_slo(DEMO_SLO)
    for seed in (int(s) for s in args.seeds.split(",")):
        profile = build_profile([str(sample_path(SAMPLE))], seed=seed)
        known = known_engine(config, profile, seed=100 + seed)  # sizes apart from the demo's
        limits = []
        for run in range(args.runs):
            started = time.perf_counter()
            curve = MissCurve(model=known.model, input_tokens=known.input_tokens,
                              output_tokens=known.output_tokens, slo=slo,
                              requests=args.requests, seed=1000 + run)  # fmt: skip
            limits.append(curve.root(np.zeros(1)))
            print(f"seed {seed} run {run}: {limits[-1]:.3f} req/s "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
        print(f"seed {seed}: mean {np.mean(limits):.3f} req/s over {len(limits)} runs", flush=True)


if __name__ == "__main__":
    main()
