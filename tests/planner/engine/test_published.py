"""The engine model against published figures it was not fitted on: the quick check rows of
bench/engine_published.py (Lambda's vLLM 0.6 runs of 10 and 160 requests, TensorRT-LLM's
online runs of Llama-3.1-8B at 4 and 8 requests/s). A row used to fit a factor (FITS) would
prove nothing and is refused here."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.engine import RequestTimeline, simulate
from testkit.published import Row, metric_value, read_table, scenario
from testkit.published_fits import FITS
from tests.helpers.missing import missing
from tests.helpers.shared_data import SHARED_DATA

OWN_TABLE = Path(__file__).resolve().parents[3] / "bench/data/engine_published/trtllm_v014.csv"
L40S_TABLE = OWN_TABLE.with_name("trtllm_l40s.csv")
TOLERANCE = 0.25


def _quick_rows() -> list[tuple[Row, Path]]:
    folder = SHARED_DATA / "engine_published"
    if not (folder / "published.csv").is_file():
        missing(f"published figures not found at {folder}")
    lambda_rows = [
        (r, folder)
        for r in read_table(folder / "published.csv")
        if r.source.startswith("lambda_raw:") and r.metric in ("output tok/s", "TPOT p50 ms")
    ]
    online = [
        (r, OWN_TABLE.parent)
        for r in read_table(OWN_TABLE)
        if r.source == "trtllm_v014_online"
        and r.model == "llama-3.1-8b"
        and r.gpu == "H100-80GB"
        and r.workload.startswith(("online 4 QPS", "online 8 QPS"))
    ]
    return lambda_rows + online


def test_quick_check_rows_within_a_quarter() -> None:
    """Fails if any of these published figures is missed by more than 25 % (the issue's
    bound for TTFT is 20 % in the median; 35 % for any one figure)."""
    rows = _quick_rows()
    assert len(rows) >= 20
    misses = []
    runs: dict[tuple[str, str, str], list[RequestTimeline]] = {}
    for row, folder in rows:
        assert not any(f.matches(row) for f in FITS), f"{row.key} is a fitting row"
        sc = scenario(row, folder)
        assert sc.config is not None, sc.why_not
        key = (row.source, row.gpu, row.workload)
        if key not in runs:
            runs[key] = simulate(list(sc.requests), sc.config)
        error = metric_value(row.metric, runs[key]) / row.published - 1
        if abs(error) > TOLERANCE:
            misses.append(f"{row.key}: {error:+.1%}")
    assert not misses, misses


@pytest.mark.parametrize("metric", ["output tok/s", "TTFT p50 ms"])
def test_a_row_the_model_cannot_represent_says_why(metric: str, tmp_path: Path) -> None:
    row = Row(
        index=0,
        source="x",
        engine="DeepSpeed-MII",
        gpu="H100-80GB",
        precision="BF16",
        model="llama-3.1-8b",
        tp=1,
        workload="offline fixed 128/128",
        metric=metric,
        published=1.0,
        reference="",
    )
    sc = scenario(row, tmp_path)
    assert sc.config is None and sc.why_not is not None and "DeepSpeed-MII" in sc.why_not


def test_itl_p50_is_the_median_of_every_gap_pooled_not_a_per_request_mean() -> None:
    # one request with gaps of 10 ms x 3 and 100 ms, one with a single 20 ms gap: pooled
    # gaps 10, 10, 10, 100, 20 -> median 10 ms (a mean of gaps or of TPOTs would say 30+)
    a = RequestTimeline(
        request_id="a", arrival_s=0.0, prompt_tokens=8, first_token_s=0.1, last_token_s=0.23,
        output_tokens=5,
    )  # fmt: skip
    a.token_times_s = [0.1, 0.11, 0.12, 0.13, 0.23]
    b = RequestTimeline(
        request_id="b", arrival_s=0.0, prompt_tokens=8, first_token_s=0.2, last_token_s=0.22,
        output_tokens=2,
    )  # fmt: skip
    b.token_times_s = [0.2, 0.22]
    assert metric_value("ITL p50 ms", [a, b]) == pytest.approx(10.0)


def test_each_fitted_factor_names_exactly_one_published_row() -> None:
    """Every factor of FITS is fitted on exactly one row of the bench's tables (the shared
    table, trtllm_v014.csv, trtllm_l40s.csv), so every other row is a check; the L40S's
    three (mfu, mbu, its PCIe link share) come from its TensorRT-LLM 0.14 rows. Fails if a
    fit's row filter matches several rows (a version or a length pair left open) or none."""
    folder = SHARED_DATA / "engine_published"
    if not (folder / "published.csv").is_file():
        missing(f"published figures not found at {folder}")
    rows = [
        *read_table(folder / "published.csv"),
        *read_table(OWN_TABLE),
        *read_table(L40S_TABLE),
    ]
    counts = {f.label: sum(1 for r in rows if f.matches(r)) for f in FITS}
    assert all(n == 1 for n in counts.values()), counts
    l40s = [next(r for r in rows if f.matches(r)) for f in FITS if f.name == "L40S-48GB"]
    assert sorted(f"{r.source} tp{r.tp} {r.workload}" for r in l40s) == [
        "trtllm_v014_l40s tp1 offline fixed 128/2048",
        "trtllm_v014_l40s tp1 offline fixed 2048/128",
        "trtllm_v014_l40s tp4 offline fixed 1000/1000",
    ]
