"""Does the default limit search on users land on the closed-loop truth, and in how much load?

    .venv/bin/python bench/limit_concurrency_truth.py [--case short|refusing|long ...]
        [--seeds 3]

For each truth server of bench/search_truth.py (8 slots of 0.69 s requests at
`ttft:p95<=0.5s`; 6 slots that refuse beyond, at `ttft:p95<=1s`; 32 slots of 10 s requests at
`ttft:p95<=2s`) held in virtual time (testkit/sim_server.py), on `--dimension
concurrency`: the truth, the most closed-loop users whose TTFT p95 (a refusal counting as
infinite) stays within the threshold, from testkit/queue_truth.py's closed FCFS queue (its
own code, 100,000 requests a count); `capplan limit`'s default (planner.limit.fast.closed:
closed-loop steps until one is past the SLO by a margin, the characterised model's closed
loop, then N - k must hold and N + k must fail, k = max(1, round(10 % N)), measured, the
measured search going on where they do not hold N); and the measured search alone from 1
user (`--method measured`, the default `--start`). Each measured level follows the default
steady-state rules (testkit/closed_probe.py). Prints per seed the answers, their ratios to
the truth and the minutes of load, then per case the medians and the default's load time
over the measured search's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.limit.fast.closed import fast_concurrency  # noqa: E402
from planner.limit.fast.result import seeded  # noqa: E402
from planner.limit.fast.steps import Closed, FastConfig, FastResult  # noqa: E402
from planner.limit.measured.config import SearchConfig  # noqa: E402
from planner.limit.measured.search import run_search  # noqa: E402
from planner.limit.measured.steady import SteadyRules  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from testkit.closed_probe import ClosedProbe  # noqa: E402
from testkit.fast_driver import RETRY_S, Driver, asked_of  # noqa: E402
from testkit.fast_truth import truth_cases  # noqa: E402
from testkit.queue_truth import closed_max_users  # noqa: E402
from testkit.sim_server import ServerSpec  # noqa: E402


def truth_users(spec: ServerSpec, threshold_s: float) -> int:
    tokens = spec.draw_tokens(np.random.default_rng(12345), 100_000)
    service = spec.prefill_s + tokens * spec.per_token_s
    first = np.full(service.size, spec.prefill_s)
    return closed_max_users(service, first, spec.slots, threshold_s, 0.95, refuse=spec.refuse,
                            retry_s=RETRY_S)  # fmt: skip


def _probe(spec: ServerSpec, slo_text: str, seed: int) -> ClosedProbe:
    slo = parse_slo(slo_text)
    return ClosedProbe(spec, SteadyRules(), slo, drain_s=(slo.longest_wait_s or 10.0) + 1.0,
                       seed=seed)  # fmt: skip


def default(spec: ServerSpec, slo_text: str, seed: int) -> tuple[float | None, float, str]:
    """(answer in users, virtual seconds of load, how it ended) of the default search."""
    config = FastConfig(parse_slo(slo_text), seed=seed)
    driver = Driver(spec, seed, drain_s=(config.slo.longest_wait_s or 10.0) + 1.0)
    search = fast_concurrency(config, asked=asked_of(spec, seed=seed))
    try:
        step = next(search)
        while True:
            assert isinstance(step, Closed)
            step = search.send(driver.closed(step))
    except StopIteration as stop:
        result: FastResult = stop.value
    search_config = SearchConfig(slo=config.slo, dimension="concurrency", seed=seed,
                                 max_pooled_s=SteadyRules().max_level_s)  # fmt: skip
    search_config = seeded(search_config, result, echo=lambda _: None)
    probe = _probe(spec, slo_text, seed)
    found = run_search(probe, search_config)
    levels = ", ".join(f"{o.load:g} {'pass' if o.passed else 'fail'}" for o in found.levels)
    how = f"model {result.limit}; {found.stopped} ({levels})"
    answer = search_config.answered if found.held_answer else found.feasible_max
    return answer, driver.server.now + probe.took_s, how


def measured(spec: ServerSpec, slo_text: str, seed: int) -> tuple[float | None, float]:
    config = SearchConfig(slo=parse_slo(slo_text), dimension="concurrency", start=1.0,
                          seed=seed, max_pooled_s=SteadyRules().max_level_s)  # fmt: skip
    probe = _probe(spec, slo_text, seed)
    return run_search(probe, config).feasible_max, probe.took_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", help="default: short, refusing, long")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    cases = {c.name: c for c in truth_cases()}
    lines = []
    for name in args.case or ["short", "refusing", "long"]:
        case = cases[name]
        truth = truth_users(case.spec, case.ttft_s)
        print(f"{name}: truth {truth} users at {case.slo}", flush=True)
        rows: dict[str, list[tuple[float, float]]] = {"default": [], "measured": []}
        for seed in range(args.seeds):
            answer, took, how = default(case.spec, case.slo, seed)
            rows["default"].append(((answer or 0) / truth, took / 60))
            print(f"  default seed {seed}: {answer} users, ratio {(answer or 0) / truth:.3f}, "
                  f"{took / 60:.1f} min: {how}", flush=True)  # fmt: skip
            answer, took = measured(case.spec, case.slo, seed)
            rows["measured"].append(((answer or 0) / truth, took / 60))
            print(f"  measured seed {seed}: {answer} users, ratio {(answer or 0) / truth:.3f}, "
                  f"{took / 60:.1f} min", flush=True)  # fmt: skip
        medians = {m: float(np.median([t for _, t in r])) for m, r in rows.items()}
        for method, r in rows.items():
            ratios = [x for x, _ in r]
            lines.append(f"{name:9} {truth:5d} {method:9} {min(ratios):6.3f} {max(ratios):6.3f} "
                         f"{medians[method]:8.1f}")  # fmt: skip
        lines.append(f"{name:9} {'':5} {'time default/measured':>24} "
                     f"{medians['default'] / medians['measured']:8.2f}")  # fmt: skip
    print(f"{'case':9} {'truth':>5} {'method':9} {'min':>6} {'max':>6} {'median min':>8}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
