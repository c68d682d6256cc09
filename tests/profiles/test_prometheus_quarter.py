"""A quarter from Prometheus: 90 days of a two-instance vLLM fleet with daily and weekly shape and
2 % growth a week, backfilled into a real Prometheus, profiled and reviewed.

The generator (testkit/prom_fleet.py) keeps every request it drew; each figure is checked
against that truth within what the step (15 s) and the buckets allow, stated at each check.
Only what a quarter adds to tests/profiles/test_prometheus.py is written: the request counter
at every 15 s scrape, the length histograms and prefix-cache counters once an hour (the reader
reads them at hour bounds only; denser samples change Prometheus's storage, not what is read),
no restart. About 25 s to generate and backfill, once for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import load_profile
from testkit.prom_fleet import LEN_EDGES, STEP_S, PromServer, Truth, generate, served
from tests.helpers.prom_fixture import NEEDS_PROMETHEUS

pytestmark = NEEDS_PROMETHEUS

DAYS = 90
WEEKLY_GROWTH = 0.02
WEEKEND = 0.6
FAMILIES = {
    "vllm:request_success",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
}


@pytest.fixture(scope="module")
def quarter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PromServer, Truth, Path]]:
    root = tmp_path_factory.mktemp("prom-quarter")
    truth = generate(
        root / "quarter.om", days=DAYS, instances=2, base_rps=0.5, weekend=WEEKEND,
        weekly_growth=WEEKLY_GROWTH, slow_every=3600 // STEP_S, restart=False, families=FAMILIES,
    )  # fmt: skip
    with served(root / "quarter.om", root) as server:
        (root / "quarter.om").unlink()  # backfilled: the text is no longer needed
        yield server, truth, root


def _fleet_minutes(truth: Truth) -> np.ndarray:
    counts = sum(truth.counts.values())
    assert isinstance(counts, np.ndarray)
    return counts.reshape(-1, 60 // STEP_S).sum(axis=1)  # requests per clock minute


@pytest.fixture(scope="module")
def profiled(quarter: tuple[PromServer, Truth, Path]) -> Path:
    server, truth, root = quarter
    args = ["profile", f"prometheus:{server.url}", "--match", '{job="vllm"}',
            "--since", str(truth.start_epoch_s), "--until", str(truth.end_epoch_s)]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "-o", str(root / "p.json"), "-q"])
    assert result.exit_code == 0, result.output
    return root / "p.json"


def test_a_quarter_counts_peaks_and_clock_hours_exactly(
    quarter: tuple[PromServer, Truth, Path], profiled: Path
) -> None:
    _, truth, _ = quarter
    p = load_profile(profiled)
    per_min = _fleet_minutes(truth)
    assert p.requests == int(per_min.sum())
    for inst, c in truth.counts.items():
        assert p.groups[inst].requests == int(c.sum())
    # Counter differences per 15 s step are exact: so are the peaks down to the step.
    counts = sum(truth.counts.values())
    assert isinstance(counts, np.ndarray)
    assert p.arrivals.peak_rate_rps["15s"] == pytest.approx(counts.max() / STEP_S)
    assert p.arrivals.peak_rate_rps["60s"] == pytest.approx(per_min.max() / 60)
    # Capacity by clock hour: all 2,160 hours' peak 60 s rates, exactly.
    assert p.arrivals.clock_hours is not None
    hourly = per_min.reshape(-1, 60).max(axis=1) / 60
    assert len(p.arrivals.clock_hours.peak_rps) == hourly.size == DAYS * 24
    np.testing.assert_allclose(p.arrivals.clock_hours.peak_rps, hourly, atol=1e-6)
    # Lengths: every percentile inside the bucket that holds the truth's.
    inputs = np.concatenate(list(truth.inputs.values()))
    for q in (50, 90, 99):
        true = float(np.percentile(inputs, q))
        i = int(np.searchsorted(LEN_EDGES, true, side="left"))
        assert LEN_EDGES[i - 1] <= getattr(p.lengths.input, f"p{q}") <= LEN_EDGES[i]
    assert p.lengths.input.mean == pytest.approx(inputs.mean(), rel=1e-9)
    assert p.prefix.reported_cached_token_ratio == pytest.approx(
        truth.prefix_hits / truth.prefix_queries, rel=1e-9
    )
    print(f"\n{p.requests} requests over {DAYS} days; 60 s peak {per_min.max() / 60:.3f} req/s")


def _review(root: Path, name: str, service: dict[str, object]) -> dict:  # type: ignore[type-arg]
    (root / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "services": [service]}))
    out = root / f"{name}.pdf"
    result = CliRunner().invoke(app, ["review", str(root / f"{name}.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.with_suffix(".json").read_text())["services"][0]  # type: ignore[no-any-return]


def test_the_quarter_review_from_metrics_has_the_truths_weeks_hours_and_growth(
    quarter: tuple[PromServer, Truth, Path],
) -> None:
    """The review's weekly peaks and hours of day against the generator's counts, its growth
    against the generator's rate, and the same counts as the review of the equivalent request
    log (each step's requests spread uniformly inside it, with their drawn lengths)."""
    server, truth, root = quarter
    service = {"name": "chat", "limit": "0.5rps", "slo": "ttft:p95<=1s", "redundancy": 0}
    metrics = _review(root, "metrics", {
        **service, "profile": f"prometheus:{server.url}", "match": '{job="vllm"}',
        "since": str(truth.start_epoch_s), "until": str(truth.end_epoch_s),
    })  # fmt: skip
    hourly = _fleet_minutes(truth).reshape(-1, 60).max(axis=1) / 60
    # Weekly peaks: the highest hourly peak of each full week from the first hour, exactly.
    weeks = hourly.size // 168
    trend = metrics["trend"]
    assert trend is not None and trend["weeks"] == weeks == 12
    np.testing.assert_allclose(
        trend["weekly_peak_rps"], hourly[: weeks * 168].reshape(weeks, 168).max(axis=1), atol=1e-6
    )
    # Growth: the generator's 2 % a week; the weekly maxima of 60 s windows scatter by about
    # 4 % around the rate's shape, so the fitted slope's standard error is about 0.35 % a week
    # (12 weeks): within 1 percentage point.
    assert trend["weekly_growth"] == pytest.approx(WEEKLY_GROWTH, abs=0.01)
    assert metrics["growth_source"] == "data"
    # Hours of day by day type: the most any day of that type needed, from the exact peaks.
    hour_epoch = truth.start_epoch_s + 3600 * np.arange(hourly.size)
    day, hour_of_day = hour_epoch // 86400, hour_epoch % 86400 // 3600
    weekend = (day + 3) % 7 >= 5  # 1970-01-01 was a Thursday
    by_type = {t["day_type"]: t for t in metrics["hourly"]["day_types"]}
    for name, mask in (("weekday", ~weekend), ("weekend", weekend)):
        truth_peaks = [hourly[mask & (hour_of_day == h)].max() for h in range(24)]
        np.testing.assert_allclose(by_type[name]["peak_rps"], truth_peaks, atol=1e-6)
        assert by_type[name]["days"] == np.unique(day[mask]).size
    rng = np.random.default_rng(5)
    parts = []
    for inst, c in truth.counts.items():
        step = np.repeat(np.arange(c.size), c)
        t = truth.start_epoch_s + (step + rng.random(step.size)) * STEP_S
        parts.append(pl.DataFrame({"timestamp": t, "input_tokens": truth.inputs[inst],
                                   "output_tokens": truth.outputs[inst]}))  # fmt: skip
    pl.concat(parts).sort("timestamp").write_parquet(root / "requests.parquet")
    log = _review(root, "log", {**service, "logs": ["requests.parquet"]})
    print(f"\nweekly growth {trend['weekly_growth']:.4f} (truth {WEEKLY_GROWTH}); instances "
          f"{metrics['instances']} (log {log['instances']}); peak {metrics['peak_rps']:.3f} "
          f"(log {log['peak_rps']:.3f}) req/s")  # fmt: skip
    assert metrics["instances"] == log["instances"]
    assert metrics["trend"]["weekly_peak_rps"] == pytest.approx(log["trend"]["weekly_peak_rps"])
    assert (
        metrics["hourly"]["per_clock_hour_instances"] == log["hourly"]["per_clock_hour_instances"]
    )
    assert metrics["peak_rps"] == pytest.approx(log["peak_rps"], rel=0.01)
