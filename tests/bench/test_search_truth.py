"""The limit search with its default steady-state rules lands on the queueing truth: one
seeded search against the simulated ~0.7 s slot server (M/G/c truth) and one against the
server that refuses beyond 6 active requests (Erlang-B truth), in virtual time
(bench/search_truth.py runs many seeds and all cases; tests/integration/test_limit_truth.py
the real server)."""

from __future__ import annotations

import pytest

from bench.kit.limit_truth import REFUSING, SHORT, TruthCase
from bench.kit.slot_probe import search_slot_queue
from bench.search_truth import queue_of, truth_of

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
