"""`capplan verify` over slot servers behind a real nginx agrees with the queueing truth.

3 slot servers (4 FIFO slots, service 0.05 + 8..16 x 0.05 s) sit behind nginx's round-robin.
The plan's count comes from the truth, not from capplan's engine model: the per-instance
limit is the highest Poisson rate whose M/G/4 FCFS TTFT p95 holds `ttft:p95<=0.5s`
(testkit.queue_truth, code apart from capplan's), given to `capplan plan --limit <x>rps`
as a limit measured elsewhere, at a peak of 2.9 x that limit: the plan says 3. The truth's
steady state at that peak (Poisson arrivals dealt round-robin to 3 or 2 servers, and each
instance alone under Poisson arrivals at peak / n) holds at 3 and fails at 2; `capplan
verify` must say the same (exit 0, then exit 1 with one server out of nginx's pool), and its
measured TTFT p95 must sit within 15 % of the FCFS truth of what the servers logged (their
arrivals and service times, GET /timings) in the judged steady window. A truth computed with
one slot too few or too many must not: the comparison tells slot counts apart.
About 2 minutes (two verify runs of 30 + 5 + 20 s at wall speed); `pytest -s` prints the
figures, as does `python -m bench.verify_truth`.
"""

from __future__ import annotations

import pytest

from testkit.verify_truth import CaseResult, SlotFleetCase, run_case

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
]
CASE = SlotFleetCase()


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> CaseResult:
    found = run_case(CASE, tmp_path_factory.mktemp("verify-slots"))
    print("\n" + "\n".join(found.lines()))
    return found


def test_the_truths_limit_plans_three(result: CaseResult) -> None:
    assert result.instances == 3
    assert "given as --limit" in " ".join(result.plan_output.split())
    # the truth's own verdicts at the plan's peak: 3 hold, 2 do not, both ways of feeding them
    threshold = CASE.ttft_threshold_s
    assert result.predicted_p95_at_n_s <= threshold < result.predicted_p95_below_s
    assert result.per_instance_p95_at_n_s <= threshold < result.per_instance_p95_below_s


def test_verify_holds_at_n_and_fails_at_n_minus_one_as_the_truth_says(result: CaseResult) -> None:
    at_n, below = result.at_n, result.below
    assert at_n.exit_code == 0, at_n.output
    assert "n=3 of 3 planned instances held the SLO" in at_n.output
    assert at_n.verify.valid and at_n.verify.held_peak and at_n.verify.recovered
    assert below.exit_code == 1, below.output
    assert "n=2 of 3 planned instances did NOT hold the SLO" in below.output
    assert below.verify.valid and not below.verify.held_peak
    # the server out of nginx's pool took nothing; the 2 in it took half each
    shares = sorted(r.share or 0.0 for r in below.verify.instances)
    assert shares[0] == 0.0 and shares[1] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("run", ["at_n", "below"])
def test_measured_ttft_p95_sits_on_the_fcfs_truth_of_the_servers_logs(
    result: CaseResult, run: str
) -> None:
    measured = getattr(result, run)
    assert measured.ttft_p95_s is not None
    assert measured.logged_ttfts(CASE.slots).size >= 200
    truth = measured.truth_p95_s(CASE.slots)
    assert measured.ttft_p95_s == pytest.approx(truth, rel=0.15)
    for wrong in (CASE.slots - 1, CASE.slots + 1):  # the control: a wrong slot count is caught
        assert measured.ttft_p95_s != pytest.approx(measured.truth_p95_s(wrong), rel=0.15), wrong
