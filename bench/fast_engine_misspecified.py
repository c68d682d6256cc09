"""The fast search with an engine model that misstates the server: does the correction keep
the answer in the band, or does the run fall back?

    python bench/fast_engine_misspecified.py [--scale 0.8] [--seed 0] [--requests 40000]

The demo's setting (its profile, `ttft:p95<=2s`, 4x, its level rules), but the emulator
runs an engine whose memory-bandwidth and compute utilisations are `--scale` times the
nominal ones (a slower server), while the fast search predicts with the nominal engine
model, as a calibration gone stale would. The truth is the slower engine's long-run limit
(`bench/demo_truth.py`'s method: the engine in virtual time over `--requests` Poisson
arrivals, two runs). Prints the fast search's account, the truth and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capplan.demo import DEMO_GPU, DEMO_MODEL, DEMO_SLO, MODEL_NAME, SAMPLE, DemoOptions  # noqa: E402
from planner.emulator import emulator_subprocess  # noqa: E402
from planner.engine import build_engine_config  # noqa: E402
from planner.limit.fast.engine_model import known_engine  # noqa: E402
from planner.limit.fast.misses import MissCurve  # noqa: E402
from planner.limit.measured.steady import SteadyRules  # noqa: E402
from planner.limit.options import LimitOptions  # noqa: E402
from planner.limit.run import run_limit  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from profiles.build import build_profile  # noqa: E402
from profiles.model import save_profile  # noqa: E402
from profiles.samples import sample_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--scale", type=float, default=0.8, help="the server's mbu and mfu share")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--requests", type=int, default=40_000, help="arrivals per truth run")
    args = ap.parse_args()
    demo = DemoOptions()
    nominal = build_engine_config(DEMO_GPU, DEMO_MODEL)
    server = nominal.model_copy(
        update={"mbu": nominal.mbu * args.scale, "mfu": nominal.mfu * args.scale}
    )
    slo = parse_slo(DEMO_SLO)
    profile = build_profile([str(sample_path(SAMPLE))], seed=args.seed)
    rules = SteadyRules(warmup_e2es=3.0, effective_requests=20.0, tail_requests=0.0,
                        max_level_s=150.0)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        profile_path = Path(tmp) / "profile.json"
        save_profile(profile, profile_path)
        started = time.perf_counter()
        emulator = emulator_subprocess(
            server, seed=args.seed, model_name=MODEL_NAME, speed=demo.speed,
            stream_interval=demo.stream_interval,
        )  # fmt: skip
        with emulator as url:
            limit = run_limit(
                LimitOptions(
                    host=url,
                    model=MODEL_NAME,
                    slo=slo,
                    out_dir=Path(tmp) / "run",
                    profile=str(profile_path),
                    dimension="rate",
                    start=10.0,
                    steady_rules=rules,
                    tolerance=demo.tolerance,
                    growth=demo.search_growth,
                    seed=args.seed,
                    max_repeats=0,
                    max_levels=demo.max_levels,
                    time_scale=demo.speed,
                    method="fast",
                    engine=nominal,
                ),  # fmt: skip
                echo=lambda line: print(
                    f"[{time.perf_counter() - started:5.0f} s] {line}", flush=True
                ),  # fmt: skip
            )
    known = known_engine(server, profile, seed=100 + args.seed)
    truths = []
    for run in range(2):
        curve = MissCurve(model=known.model, input_tokens=known.input_tokens,
                          output_tokens=known.output_tokens, slo=slo, requests=args.requests,
                          seed=1000 + run)  # fmt: skip
        truths.append(curve.root(np.zeros(1)))
        print(f"truth run {run}: {truths[-1]:.3f} req/s", flush=True)
    truth = float(np.mean(truths))
    fast = limit.fast
    answer = limit.feasible_max
    print(f"server at {args.scale:g}x the nominal utilisation; nominal model predicted "
          f"{fast.predicted_rps if fast else None}; answer {answer} ({limit.method}); "
          f"fast: {fast.stopped if fast else None}; truth {truth:.3f}"
          + (f"; ratio {answer / truth:.3f}" if answer else ""))  # fmt: skip


if __name__ == "__main__":
    main()
