"""How often the confirmation's first chunk sees a server slower than the model (issue 60
item 3), in virtual time, over many seeds.

The simulated 8-slot ~0.7 s server (testkit/sim_server.py, `ttft:p95<=0.5s`) works
`--work` times its closed-loop work under open loop (`open_loop_work`); the model is the
server's exact closed-loop description (8 FIFO slots, 50 ms to the first token, 10 ms a
token). One warm chunk, as the fast search sends it, runs at the model's predicted limit.
Per seed it prints nothing; at the end, for each work factor: the share of seeds whose queue
check (planner.limit.fast.queue: paired delays, z-test at the search's confidence) says the
queues differ, the share whose miss bias alone is beyond two errors (the check before), and
the fitted pace's median and 5-95 % range. With `--work 1.0` the first share is the false
alarm rate. `--work-cv` (0.1) jitters each request's work by that coefficient of variation,
drawn by the server and unknown to the model (without it the replay of the same arrivals
reproduces the simulated server exactly, and any slower pace shows with certainty).

    .venv/bin/python bench/queue_check_power.py [--seeds 200] [--work 1.05 --work 1.0]
        [--work-cv 0.1]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.limit.fast.misses import MissCurve, targets  # noqa: E402
from planner.limit.fast.model import ServerModel  # noqa: E402
from planner.limit.fast.paired import paired  # noqa: E402
from planner.limit.fast.queue import QueueVerdict, decode_pace, fit_pace  # noqa: E402
from planner.limit.fast.stats import batch_means_se  # noqa: E402
from planner.limit.fast.steps import FastConfig, Open  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from testkit import fast_truth  # noqa: E402
from testkit.fast_driver import Driver, asked_of  # noqa: E402
from testkit.sim_server import ServerSpec  # noqa: E402


def _exact_model() -> ServerModel:
    return ServerModel(slots=8, first_s=(0.05, 0.0), decode_s=(0.01, 0.01), slowdown=(1.0,) * 8)


def _one(config: FastConfig, curve: MissCurve, spec: ServerSpec, rate: float, seed: int,
         z: float) -> tuple[bool, bool, float | None]:  # fmt: skip
    """(queue check says differ, miss bias beyond two errors, fitted pace) for one chunk."""
    model = curve.model
    assert isinstance(model, ServerModel)
    driver = Driver(spec, seed)
    mean_work = model.mean_work_s(curve.input_tokens, curve.output_tokens)
    chunk = max(config.chunk_s, config.chunk_requests / rate, config.chunk_e2es * mean_work)
    taken = driver.open(Open(rate, chunk, burst=model.in_service(rate, mean_work), fresh=True))
    rng = np.random.default_rng([seed, 5])
    pairs = paired(config, curve, model, taken, taken.start_s, taken.start_s, rate, rng)
    delays = pairs.delays_s[~np.isnan(pairs.delays_s)]
    se = batch_means_se(delays)
    chains = [(taken.start_s, taken)]
    service, service_se = decode_pace(model, chains, taken.start_s, curve)
    verdict = QueueVerdict(delay_bias_s=float(delays.mean()),
                           delay_se_s=math.inf if se is None else se,
                           decode_pace=service, decode_se=service_se)  # fmt: skip
    diffs = pairs.diffs[:, 0]
    diffs = diffs[~np.isnan(diffs)]
    miss_se = batch_means_se(diffs)
    err = math.inf if miss_se is None else max(miss_se, 1.0 / max(diffs.size, 1))
    misses_show = abs(float(diffs.mean())) - 2 * err > 0
    pace = fit_pace(config, curve, model, chains, taken.start_s, rate)
    return verdict.differs(z), misses_show, pace


def main() -> None:
    """Print the queue check's detection share per work factor (see the module)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds per work factor")
    parser.add_argument(
        "--work-cv",
        type=float,
        default=0.1,
        help="each request's work jittered by this CV, unknown to the model",
    )
    parser.add_argument("--work", type=float, action="append",
                        help="open-loop work over closed (repeatable)")  # fmt: skip
    args = parser.parse_args()
    seeds, work = args.seeds, args.work or [1.05, 1.0]
    case = fast_truth.truth_cases()[0]
    config = FastConfig(parse_slo(case.slo), seed=0)
    asked = asked_of(case.spec, seed=0)
    curve = MissCurve(model=_exact_model(), input_tokens=asked.input_tokens,
                      output_tokens=asked.output_tokens, slo=config.slo,
                      requests=config.root_requests, seed=0)  # fmt: skip
    rate = curve.root(np.zeros(len(targets(config.slo))))
    z = float(norm.ppf(0.5 + config.confidence / 2))
    print(f"model's limit {rate:.3f} req/s; z {z:.3f}; {seeds} seeds, one chunk each")
    for factor in work:
        spec = replace(case.spec, open_loop_work=factor, work_cv=args.work_cv)
        truth = fast_truth.truth(replace(case, spec=replace(spec, work_cv=0.0)))
        runs = [_one(config, curve, spec, rate, seed, z) for seed in range(seeds)]
        queue = np.mean([r[0] for r in runs])
        misses = np.mean([r[1] for r in runs])
        paces = np.array([r[2] for r in runs if r[2] is not None])
        spread = (f"median {np.median(paces):.3f} [{np.quantile(paces, 0.05):.3f}, "
                  f"{np.quantile(paces, 0.95):.3f}]") if paces.size else "none"  # fmt: skip
        print(f"work x{factor:g}, jitter CV {args.work_cv:g}: truth without jitter {truth:.3f} "
              f"req/s (model's limit {rate / truth:.3f} of "
              f"it); queue check differs {queue:.1%}, miss bias beyond 2 errors {misses:.1%}; "
              f"fitted pace {spread} ({paces.size} fitted)")  # fmt: skip


if __name__ == "__main__":
    main()
