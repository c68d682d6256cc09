"""The limit search with its default steady-state rules lands on the queueing truth: one
seeded search against the simulated ~0.7 s slot server (M/G/c truth) and one against the
server that refuses beyond 6 active requests (Erlang-B truth), in virtual time
(bench/search_truth.py runs many seeds and all cases; tests/integration/test_limit_truth.py
the real server)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from planner.limit.fast.steps import FastConfig
from planner.slo.spec import parse_slo
from testkit import fast_truth
from testkit.fast_driver import run_fast
from testkit.limit_truth import REFUSING, SHORT, TruthCase
from testkit.search_cases import queue_of, truth_of
from testkit.slot_probe import search_slot_queue

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", [SHORT, REFUSING], ids=lambda c: c.name)
def test_default_rules_land_within_ten_percent_below_and_five_above_the_truth(
    case: TruthCase,
) -> None:
    queue = queue_of(case)
    truth = truth_of(case, queue)
    found, virtual_s = search_slot_queue(queue, case.slo, start_rps=case.start_rps, seed=0)
    assert found is not None
    print(f"truth {truth:.3f} req/s, found {found:.3f} ({found / truth:.3f}), {virtual_s:.0f} s")
    assert 0.90 <= found / truth <= 1.05


def test_the_fast_search_lands_on_the_truth_in_a_fraction_of_the_measured_time() -> None:
    """Characterise, predict, confirm and correct (planner.limit.fast) on the simulated ~0.7 s
    slot server (testkit/sim_server.py, apart from the model), against the M/G/c truth.
    The measured search takes about 33 virtual minutes on this case (bench/search_truth.py)."""
    case = fast_truth.truth_cases()[0]
    truth = fast_truth.truth(case)
    config = FastConfig(parse_slo(case.slo), seed=0, curve_requests=30_000, bootstrap=4)
    result, took_s = run_fast(case.spec, config, seed=0)
    assert result.adequate and result.limit is not None
    assert result.low is not None and result.high is not None
    print(f"truth {truth:.3f}, fast {result.limit:.3f} [{result.low:.3f}, {result.high:.3f}], "
          f"{took_s / 60:.1f} min: {result.stopped}")  # fmt: skip
    assert 0.95 <= result.limit / truth <= 1.05
    assert result.low <= truth <= result.high
    assert took_s < 11 * 60  # a third of the measured search's time on this case
    # control: the model alone with its slot count misstated by a quarter misses the band,
    # so the check above can fail
    wrong = replace(case, slots_error=1.25)
    alone, _ = run_fast(wrong.spec, replace(config, confirm=False), seed=0,
                        characterise=wrong.characterise())  # fmt: skip
    assert alone.limit is not None and not 0.95 <= alone.limit / truth <= 1.05


def test_with_the_sizes_it_asks_the_fast_search_lands_on_a_heavy_tailed_truth() -> None:
    """16 slots, answers lognormal with CV 2, TTFT p95 within half a mean service: the M/G/c
    truth (a million arrivals, testkit/fast_truth.py) depends on the rare long answers
    that hold slots. A load test knows the sizes it asks (its profile's; here the driver's
    draws): with them the search lands on the truth and its interval covers it. Control:
    sized by the answers its closed-loop steps returned (their longest rarely end in a
    step), the model alone predicted 17 % above the truth on this seed."""
    case = next(c for c in fast_truth.grid_cases() if c.name == "c16-cv2-tight")
    truth = fast_truth.truth(case)
    result, took_s = fast_truth.fast(case, seed=0)
    print(f"truth {truth:.3f}, fast {result.limit} [{result.low}, {result.high}], "
          f"{took_s / 60:.1f} min: {result.stopped}")  # fmt: skip
    assert result.adequate and result.limit is not None
    assert result.low is not None and result.high is not None
    assert 0.95 <= result.limit / truth <= 1.05 and result.low <= truth <= result.high
    assert result.sizes == "profile"  # limit.json says which sizes (planner.limit.fast.result)
    config = FastConfig(parse_slo(case.slo), seed=0, confirm=False)
    alone, _ = run_fast(case.spec, config, seed=0)  # no `asked`: the sizes it measured
    assert alone.limit is not None and alone.limit / truth > 1.1 and alone.sizes == "measured"


@pytest.mark.skipif(
    os.environ.get("CAPPLAN_LONG_TESTS") != "1",
    reason="about 4 minutes (two searches that fall back to the measured search): set "
    "CAPPLAN_LONG_TESTS=1; tests/planner/limit/test_fastlimit.py checks the delay comparison",
)
@pytest.mark.parametrize("seed", [3, 6])
def test_a_model_with_a_quarter_fewer_slots_falls_back_or_lands_in_the_band(seed: int) -> None:
    """Seeds on which the fast search converged at 0.695 of the truth with a model that has
    a quarter fewer slots than the server (docs/accuracy/limit.md): at the model's low
    prediction neither side missed on the chunks, so the miss bias could not show the
    missing slots. The delays show them (seed 3 at once; seed 6 once the level measured on
    while their difference was beyond the allowance but not yet clearly): the run must fall
    back or land in the band."""
    case = next(c for c in fast_truth.misspecified_cases() if c.name == "slots-25%")
    truth = fast_truth.truth(case)
    result, _ = fast_truth.fast(case, seed=seed)
    print(f"truth {truth:.3f}, fast {result.limit}: {result.stopped}")
    assert result.limit is not None
    assert not result.adequate or 0.90 <= result.limit / truth <= 1.05
