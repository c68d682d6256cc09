"""`capplan profile prometheus:URL` against a real Prometheus holding a synthetic vLLM fleet.

The fleet (2 instances, one day at 15 s scrapes, one instance restarting a third of the way in)
comes from testkit/prom_fleet.py, which keeps what it drew: every figure below is
checked against that truth, within the resolution the step and the buckets allow (stated at
each check), never against capplan itself. Backfilling the day with promtool takes about 15 s,
once for the module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from pypdf import PdfReader
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import InputError
from contracts.limit import load_limit
from profiles.arrivals import clock_hour_peaks
from profiles.model import load_profile
from profiles.prometheus.build import PromSource, build_prometheus_profile
from profiles.prometheus.client import Grid, PromClient
from testkit.prom_fleet import (
    LEN_EDGES,
    STEP_S,
    TTFT_EDGES_S,
    PromServer,
    Truth,
    free_port,
    generate,
    served,
)
from testkit.report_inputs import write_fixture
from tests.helpers.prom_fixture import NEEDS_PROMETHEUS

pytestmark = NEEDS_PROMETHEUS


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PromServer, Truth, Path]]:
    root = tmp_path_factory.mktemp("prom")
    truth = generate(root / "fleet.om", days=1.0, instances=2)
    with served(root / "fleet.om", root) as server:
        yield server, truth, root


def _range(truth: Truth) -> list[str]:
    return ["--since", str(truth.start_epoch_s), "--until", str(truth.end_epoch_s)]


def _profile(server: PromServer, truth: Truth, out: Path, *extra: str) -> tuple[int, str]:
    args = ["profile", f"prometheus:{server.url}", "--match", '{job="vllm"}', *_range(truth)]
    result = CliRunner().invoke(app, [*args, *extra, "-o", str(out), "-q"])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def profiled(fleet: tuple[PromServer, Truth, Path]) -> Path:
    server, truth, root = fleet
    code, output = _profile(server, truth, root / "p.json")
    assert code == 0, output
    assert "not in the source: the joint distribution" in output  # limitations are printed
    return root / "p.json"


def _bracket(edges: tuple[float, ...], x: float) -> tuple[float, float]:
    """The bucket (lower, upper edge) holding x."""
    i = int(np.searchsorted(edges, x, side="left"))
    return (edges[i - 1] if i else 0.0), edges[i]


def test_requests_and_rates_match_the_generated_counts(
    fleet: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    _, truth, _ = fleet
    p = load_profile(profiled)
    counts = sum(truth.counts.values())
    assert isinstance(counts, np.ndarray)
    # Counter differences per step are exact, the restarted instance's included.
    assert p.requests == int(counts.sum())
    for inst, c in truth.counts.items():
        assert p.groups[inst].requests == int(c.sum())
    assert p.arrivals.mean_rate_rps == pytest.approx(counts.sum() / (counts.size * STEP_S))
    per_min = counts.reshape(-1, 60 // STEP_S).sum(axis=1)
    assert p.arrivals.peak_rate_rps["15s"] == pytest.approx(counts.max() / STEP_S)
    assert p.arrivals.peak_rate_rps["60s"] == pytest.approx(per_min.max() / 60)
    assert p.arrivals.window_rate_percentiles["60s"][99] == pytest.approx(
        np.percentile(per_min / 60, 99), abs=1e-6
    )
    # Below the step the metrics cannot see: 1 s and 10 s read the 15 s rate (a lower bound).
    assert p.arrivals.peak_rate_rps["1s"] == p.arrivals.peak_rate_rps["15s"]
    assert p.arrivals.fano["1s"] == 1.0
    # Capacity by clock hour: the peak 60 s rate of every UTC hour, exactly.
    assert p.arrivals.clock_hours is not None
    hourly_peaks = per_min.reshape(-1, 60).max(axis=1) / 60
    got = np.array(p.arrivals.clock_hours.peak_rps[: hourly_peaks.size])
    np.testing.assert_allclose(got, hourly_peaks, atol=1e-6)
    # Hour of day: mean rate per UTC hour (the span is one whole day from midnight).
    assert p.arrivals.hour_of_day is not None
    first_hour = (truth.start_epoch_s % 86400) // 3600
    per_hour = counts.reshape(-1, 3600 // STEP_S).sum(axis=1) / 3600
    np.testing.assert_allclose(np.roll(p.arrivals.hour_of_day, -first_hour), per_hour, atol=1e-9)
    print(
        f"\nrequests {p.requests} (truth {int(counts.sum())}); 60 s peak "
        f"{p.arrivals.peak_rate_rps['60s']:.3f} (truth {per_min.max() / 60:.3f}) req/s; busiest "
        f"hour's peak {max(got):.3f} (truth {hourly_peaks.max():.3f})"
    )


def test_lengths_and_latency_within_a_bucket_of_the_truth(
    fleet: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    _, truth, _ = fleet
    p = load_profile(profiled)
    inputs = np.concatenate(list(truth.inputs.values()))
    outputs = np.concatenate(list(truth.outputs.values()))
    ttft = np.concatenate(list(truth.ttft_s.values()))
    assert p.lengths.input.bucket_edges == [float(e) for e in LEN_EDGES]
    assert p.lengths.sampler.kind == "independent-binned"
    assert p.lengths.io_rank_correlation is None
    # Means come from _sum / _count: exact.
    assert p.lengths.input.mean == pytest.approx(inputs.mean(), rel=1e-9)
    assert p.lengths.output.mean == pytest.approx(outputs.mean(), rel=1e-9)
    lines = []
    for name, stats, values, edges in (
        ("input", p.lengths.input, inputs, LEN_EDGES),
        ("output", p.lengths.output, outputs, LEN_EDGES),
    ):
        for q in (50, 90, 99):
            true = float(np.percentile(values, q))
            lo, hi = _bracket(edges, true)
            got = getattr(stats, f"p{q}")
            assert lo <= got <= hi, f"{name} p{q}: {got} outside the truth's bucket {lo}..{hi}"
            lines.append(f"{name} p{q} {got:.0f} (truth {true:.0f}, bucket {lo:g}-{hi:g})")
    lat = p.observed.latency["ttft"] if p.observed else None
    assert lat is not None and lat.requests == ttft.size
    for q in (50, 95):
        true = float(np.percentile(ttft, q))
        lo, hi = _bracket(TTFT_EDGES_S, true)
        got = getattr(lat, f"p{q}_s")
        assert lo <= got <= hi
        lines.append(f"ttft p{q} {got:.3f} s (truth {true:.3f}, bucket {lo:g}-{hi:g})")
    # The short share is interpolated in the (500, 1000] bucket that holds 512.
    bucket_mass = float(((inputs > 500) & (inputs <= 1000)).mean())
    truth_short = float((inputs <= 512).mean())
    assert abs(p.lengths.classes.shares["short"] - truth_short) <= bucket_mass
    assert p.prefix.reported_cached_token_ratio == pytest.approx(
        truth.prefix_hits / truth.prefix_queries, rel=1e-9
    )
    print("\n" + "; ".join(lines))


def test_chunked_reads_equal_one_read(
    fleet: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    """A quarter is read in chunks of 10,000 steps; the day here fits in one, so read it again
    in chunks of 1,000 steps (6 range queries for each metric read at the step)."""
    server, truth, _ = fleet
    src = PromSource(
        url=server.url,
        match='{job="vllm"}',
        since=str(truth.start_epoch_s),
        until=str(truth.end_epoch_s),
        chunk_steps=1000,
    )
    chunked = build_prometheus_profile(src)
    whole = load_profile(profiled)
    assert chunked.source.metrics is not None and whole.source.metrics is not None
    assert chunked.source.metrics.queries > whole.source.metrics.queries
    for key in ("arrivals", "prefix", "observed", "requests"):
        assert getattr(chunked, key) == getattr(whole, key), key
    assert chunked.groups.keys() == whole.groups.keys()
    for name, body in chunked.groups.items():
        assert body.observed == whole.groups[name].observed
        assert body.lengths.input == whole.groups[name].lengths.input


def test_the_profile_plans(fleet: tuple[PromServer, Truth, Path], profiled: Path) -> None:
    _, truth, root = fleet
    out = root / "plan.json"
    result = CliRunner().invoke(
        app, ["plan", "--profile", str(profiled), "--limit", "10rps", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    counts = sum(truth.counts.values())
    assert isinstance(counts, np.ndarray)
    peak = float(np.percentile(counts.reshape(-1, 4).sum(axis=1) / 60, 99))
    assert plan["demand"]["peak_rps"] == pytest.approx(peak, rel=1e-6)
    # n = ceil(peak x 1.2 / 10) + 1 at the default headroom and redundancy
    assert plan["instances"] == math.ceil(peak * 1.2 / 10 - 1e-9) + 1


def _check_observed(rows: list[dict], truth: Truth) -> list[str]:  # type: ignore[type-arg]
    """Each instance's observed capacity under ttft:p95<=1s against the truth: an hour meets it
    when 95 % of its drawn TTFTs are at most 1 s (1 s is a bucket edge: the check is exact)."""
    lines = []
    for row in rows:
        inst = row["instance"]
        c = truth.counts[inst]
        hour_of_request = np.repeat(np.arange(c.size), c) * STEP_S // 3600
        share = np.bincount(hour_of_request, weights=truth.ttft_s[inst] <= 1.0) / np.bincount(
            hour_of_request
        )
        rate = c.reshape(-1, 3600 // STEP_S).sum(axis=1) / 3600
        met = share >= 0.95
        assert row["windows_met"] == int(met.sum())
        assert row["carried_rps"] == pytest.approx(rate[met].max(), abs=1e-6)
        truth_missed = rate[~met].min() if (~met).any() else None
        assert row["missed_min_rps"] == pytest.approx(truth_missed, abs=1e-6)
        lines.append(f"{inst}: carried {row['carried_rps']:.3f} (truth {rate[met].max():.3f}), "
                     f"missed from {row['missed_min_rps']} (truth {truth_missed})")  # fmt: skip
    return lines


def test_the_plan_and_the_baseline_report_show_observed_capacity(
    fleet: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    """plan.json keeps what production carried beside the limit and notes the contradiction;
    the capacity baseline's limit page shows it (a load-test run from the report fixture)."""
    _, truth, root = fleet
    plan_path = root / "observed-plan.json"
    result = CliRunner().invoke(app, ["plan", "--profile", str(profiled), "--limit", "10rps",
                                      "--slo", "ttft:p95<=1s", "-o", str(plan_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "observed in production: production carried" in result.output
    plan = json.loads(plan_path.read_text())
    _check_observed(plan["observed"]["instances"], truth)
    assert plan["observed"]["contradicts_limit"] is True
    assert [n["key"] for n in plan["note_findings"]].count("note.observed_contradicts") == 1
    fx = write_fixture(root / "report-fixture")
    # the run the plan rests on: its limit.json found the plan's 10 req/s under its SLO
    found = load_limit(fx.run_dir / "limit.json")
    found = found.model_copy(update={"feasible_max": 10.0, "slo": "ttft:p95<=1s"})
    (fx.run_dir / "limit.json").write_text(found.model_dump_json(by_alias=True))
    out = root / "baseline.pdf"
    args = ["--profile", str(profiled), "--run", str(fx.run_dir), "--plan", str(plan_path)]
    result = CliRunner().invoke(app, ["report", *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    pages = [" ".join(page.extract_text().split()) for page in PdfReader(out).pages]
    missed = min(r["missed_min_rps"] for r in plan["observed"]["instances"] if r["missed_min_rps"])
    assert f"production missed the SLO from {missed:.2f} req/s per instance" in pages[0]
    text = " ".join(pages)
    assert "Observed capacity beside the load test" in text
    assert "the limit is contradicted" in text and "production contradicts the limit" in text


def test_a_review_runs_from_metrics(fleet: tuple[PromServer, Truth, Path]) -> None:
    server, truth, root = fleet
    review = {
        "name": "metrics",
        "services": [
            {
                "name": "chat",
                "profile": f"prometheus:{server.url}",
                "match": '{job="vllm"}',
                "since": str(truth.start_epoch_s),
                "until": str(truth.end_epoch_s),
                "limit": "10rps",
                "slo": "ttft:p95<=1s",
            }
        ],
    }
    (root / "review.yaml").write_text(yaml.safe_dump(review))
    out = root / "review.pdf"
    result = CliRunner().invoke(app, ["review", str(root / "review.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.with_suffix(".json").read_text())
    service = data["services"][0]
    counts = sum(truth.counts.values())
    assert isinstance(counts, np.ndarray)
    assert service["peak_rps"] == pytest.approx(
        float(np.percentile(counts.reshape(-1, 4).sum(axis=1) / 60, 99)), rel=1e-6
    )
    # Capacity by hour of day came from the metrics' clock hours (one day: weekdays only).
    assert service["hourly"] is not None
    # Observed capacity per instance, against the truth: an hour meets ttft:p95<=1s when 95 %
    # of its drawn TTFTs are at most 1 s (1 s is a bucket edge, so the check is exact).
    observed = service["observed"]
    lines = _check_observed(observed["instances"], truth)
    # The generator's second instance misses the SLO from about 3.66 req/s, far below the
    # 10 req/s limit given: the review flags the limit as contradicted by production.
    assert observed["contradicts_limit"] is True
    assert "observed_capacity" in [r["kind"] for r in service["risks"]]
    assert "production carried" in result.output
    text = " ".join(page.extract_text() for page in PdfReader(out).pages)
    assert "Observed capacity beside the load test" in text and "contradicted" in text
    # The workload page says where the profile came from and what it assumed.
    assert "Read from Prometheus" in text and "Server-observed TTFT" in text
    print("\n" + "; ".join(lines))


@pytest.mark.parametrize(
    ("extra", "match", "expected"),
    [
        # The control: SGLang's names on a vLLM fleet are missing, and the error says which.
        (["--metric-names", "sglang"], '{job="vllm"}', "sglang:prompt_tokens_histogram"),
        ([], '{job="nope"}', 'no series match {job="nope"}'),
        ([], '{job=~"("}', "refused"),
        (["--metric-names", "mystery"], '{job="vllm"}', "unknown engine 'mystery'"),
        (["--token-env", "CAPPLAN_TEST_UNSET_TOKEN"], '{job="vllm"}', "is not set"),
    ],
)
def test_bad_requests_give_one_line_and_exit_2(
    fleet: tuple[PromServer, Truth, Path], extra: list[str], match: str, expected: str
) -> None:
    server, truth, root = fleet
    args = ["profile", f"prometheus:{server.url}", "--match", match, *_range(truth), *extra]
    result = CliRunner().invoke(app, [*args, "-o", str(root / "bad.json"), "-q"])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


def test_a_range_prometheus_refuses_names_the_server_and_its_reason(
    fleet: tuple[PromServer, Truth, Path],
) -> None:
    """Prometheus refuses more than 11,000 points a series; the reader never asks for more
    (10,000-step chunks), so the refusal is provoked through the client with longer chunks."""
    server, truth, _ = fleet
    grid = Grid(start_s=truth.start_epoch_s, step_s=1, points=20_000, chunk_points=20_000)
    with pytest.raises(InputError) as err:
        next(PromClient(server.url).range_chunks("vllm:num_requests_running", grid))
    assert f"Prometheus at {server.url} refused query_range" in str(err.value)
    assert "11,000 points" in str(err.value) or "11000 points" in str(err.value)


def test_an_unreachable_server_gives_exit_2(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    out = str(tmp_path / "x.json")
    result = CliRunner().invoke(app, ["profile", f"prometheus:{url}", "-o", out])
    assert result.exit_code == 2
    assert "cannot reach Prometheus" in result.output
    mixed = CliRunner().invoke(app, ["profile", f"prometheus:{url}", "logs.csv", "-o", out])
    assert mixed.exit_code == 2 and "give it alone" in mixed.output


def test_the_review_from_metrics_counts_as_the_one_from_the_request_log(
    fleet: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    """The same requests as a request log (each step's arrivals spread uniformly inside it, with
    their drawn lengths): both reviews need the same instances, and the clock hours agree."""
    server, truth, root = fleet
    rng = np.random.default_rng(11)
    parts = []
    for inst, c in truth.counts.items():
        step = np.repeat(np.arange(c.size), c)
        t = truth.start_epoch_s + (step + rng.random(step.size)) * STEP_S
        parts.append(np.column_stack((t, truth.inputs[inst], truth.outputs[inst])))
    rows = np.concatenate(parts)
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    log = root / "requests.csv"
    np.savetxt(log, rows, fmt=("%.3f", "%d", "%d"), delimiter=",", comments="",
               header="timestamp,input_tokens,output_tokens")  # fmt: skip
    service = {"name": "chat", "limit": "2rps", "slo": "ttft:p95<=1s", "redundancy": 0}
    metrics = {
        **service,
        "profile": f"prometheus:{server.url}",
        "match": '{job="vllm"}',
        "since": str(truth.start_epoch_s),
        "until": str(truth.end_epoch_s),
    }
    got = {}
    for kind, svc in (("metrics", metrics), ("log", {**service, "logs": ["requests.csv"]})):
        (root / f"{kind}.yaml").write_text(yaml.safe_dump({"services": [svc]}))
        out = root / f"{kind}-review.pdf"
        result = CliRunner().invoke(app, ["review", str(root / f"{kind}.yaml"), "-o", str(out)])
        assert result.exit_code == 0, result.output
        got[kind] = json.loads(out.with_suffix(".json").read_text())["services"][0]
    m, lg = got["metrics"], got["log"]
    print(f"\npeak {m['peak_rps']:.3f} (log {lg['peak_rps']:.3f}) req/s; instances "
          f"{m['instances']} (log {lg['instances']})")  # fmt: skip
    # Peaks differ only by where the 60 s windows fall (clock minutes vs the first request).
    assert m["peak_rps"] == pytest.approx(lg["peak_rps"], rel=0.03)
    assert m["instances"] == lg["instances"]
    # The log spans just under a day, so its review has no hours; its clock-hour peaks, as the
    # log profiler computes them, equal the metrics' exactly (clock minutes hold whole steps),
    # so the hourly counts, which the plan's rule makes from them, are the same too.
    log_hours = clock_hour_peaks(rows[:, 0]).peak_rps
    metric_hours = load_profile(root / "p.json").arrivals.clock_hours
    assert metric_hours is not None
    np.testing.assert_allclose(metric_hours.peak_rps[: len(log_hours)], log_hours, atol=1e-6)
