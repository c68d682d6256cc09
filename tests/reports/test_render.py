"""The report PDF: every page renders, the plan's numbers and chart titles are in its text,
and the Chinese report carries no untranslated English."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image
from pypdf import PdfReader

from contracts.limit import load_limit
from reports import render_report
from reports.i18n import STRINGS
from testkit.report_inputs import (
    REFUSED_MESSAGE,
    FixturePaths,
    build_limit,
    build_plan,
    build_run,
    write_fixture,
)
from testkit.report_profile import build_profile

GENERATED_AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# Units, metric names and product names that may stay in Latin letters in the Chinese report.
ALLOWED_LATIN = {
    "req",
    "s",
    "ms",
    "h",
    "d",
    "min",
    "B",
    "GiB",
    "UTC",
    "TTFT",
    "TPOT",
    "ITL",
    "E2E",
    "SLO",
    "KV",
    "GPU",
    "CPU",
    "CV",
    "TP",
    "LRU",
    "M",
    "G",
    "c",
    "N",
    "n",
    "p50",
    "p95",
    "p99",
    "token",
    "vllm",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "sha256",
    "capplan",
    "Locust",
    "Prometheus",
    "KEDA",  # the autoscaler and the Kubernetes objects the plan writes, by their names
    "HPA",
    "ScaledObject",
    "k",
    "ttft",
    "usage",
    "HTTP",
    # a candidate that cannot run: the weight format, its flag value, the unit of a shortfall
    # and the command whose file holds the reason
    "FP4",
    "nvfp4",
    "GB",
    "whatif",
    # error classes: identifiers of records.parquet, stages.json and limit.json
    "refused",
    "client_error",
    "server_error",
    "connect",
    "connect_refused",
    "disconnect",
    "timeout",
    "stream_error",
}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
PERCENTILE = re.compile(r"p\d+")


def _unexplained(words: set[str]) -> list[str]:
    return sorted(w for w in words - ALLOWED_LATIN if not PERCENTILE.fullmatch(w))


@dataclass(frozen=True)
class Rendered:
    paths: FixturePaths
    pdf: Path
    text: str
    pages: int


def _extract(pdf: Path) -> tuple[str, int]:
    reader = PdfReader(pdf)
    return "\n".join(page.extract_text() for page in reader.pages), len(reader.pages)


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> FixturePaths:
    return write_fixture(tmp_path_factory.mktemp("report"))


def _render(paths: FixturePaths, lang: str, name: str) -> Rendered:
    pdf = render_report(
        paths.profile,
        paths.run_dir,
        paths.plan,
        paths.plan.parent.parent / name,
        previous_plan=paths.previous,
        lang=lang,
        generated_at=GENERATED_AT,
    )
    text, pages = _extract(pdf)
    return Rendered(paths, pdf, text, pages)


@pytest.fixture(scope="module")
def english(fixture_dir: FixturePaths) -> Rendered:
    return _render(fixture_dir, "en", "report-en.pdf")


@pytest.fixture(scope="module")
def chinese(fixture_dir: FixturePaths) -> Rendered:
    return _render(fixture_dir, "zh", "report-zh.pdf")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_first_page_answers_the_capacity_question(english: Rendered) -> None:
    first = _flat(PdfReader(english.pdf).pages[0].extract_text())
    assert "Serve a peak of 42 req/s" in first
    assert "4 × H100-80GB (3 + 1 spare)" in first
    assert "$12,410 per month" in first
    # the comparison with the previous plan (peak 31 req/s, limit 15.1 req/s)
    assert "Previous (chat-q4)" in first
    assert "31 req/s" in first and "+11 req/s (+35 %)" in first
    # the three risks, each named
    for title in ("Burst recovery", "KV-cache headroom", "Growth beyond the plan"):
        assert title in first
    # the recovery the load test's stage summary measured on the fixture's records
    assert "took 18.5 s to return to normal" in first
    assert "At ×2 the fleet needs 7 instances (+3), $21,718 per month" in first


def test_plan_numbers_and_chart_titles_appear(english: Rendered) -> None:
    text = _flat(english.text)
    plan = build_plan()
    for sc in plan.scenarios:
        assert f"= {sc.instances_for_load} + {sc.redundancy} = {sc.instances}" in text
        assert f"${sc.monthly_cost_usd:,.0f}" in text
    assert "17.4 req/s" in text and "18.3 req/s" in text
    assert "430,000 tokens" in text and "135,380 tokens" in text
    assert "n = 3 meets the SLO, n = 2 does not" in text
    for key, value in STRINGS["en"].items():
        if (
            key.startswith("chart_")
            and "{" not in value
            and not key.endswith(("_none", "_ideal", "_peak", "_burst"))
        ):
            assert value in text, f"chart title {value!r} missing"
    assert "page 1 of" in text and f"page {english.pages} of {english.pages}" in text
    assert "generated 2026-11-29 12:00 UTC" in text


def test_every_page_renders_to_png(english: Rendered, chinese: Rendered, tmp_path: Path) -> None:
    pdftoppm = shutil.which("pdftoppm")
    assert pdftoppm, "pdftoppm (poppler-utils) is needed; scripts/test.sh installs it"
    for rendered in (english, chinese):
        prefix = tmp_path / rendered.pdf.stem
        subprocess.run([pdftoppm, "-r", "40", "-png", str(rendered.pdf), str(prefix)], check=True)
        pngs = sorted(tmp_path.glob(f"{rendered.pdf.stem}-*.png"))
        assert len(pngs) == rendered.pages >= 6
        for png in pngs:
            with Image.open(png) as image:
                lo, hi = image.convert("L").getextrema()
            assert lo < 128 < hi, f"{png.name} looks blank"


def test_chinese_report_has_no_untranslated_english(chinese: Rendered) -> None:
    # Table cells wrap long paths and digests over lines: match data values across line ends.
    text = chinese.text.replace("\n", "\x00")
    assert "容量基线" in text and "三大风险" in text
    # identifiers that come from the data (names, paths, hosts, digests, SLO specs) are not labels
    paths = chinese.paths
    profile = build_profile()
    run, stages, _, _ = build_run()
    data = [
        " ".join(run.command),
        run.host,
        run.model,
        run.name,
        run.plan.name,
        run.endpoint,
        profile.source.format,
        "chat-q1",
        "chat-q4",
        "H100-80GB",
        "llama-3.1-8b",
        "ttft:p95<=2s",
        *profile.source.files,
        str(paths.profile),
        str(paths.plan),
        str(paths.previous),
        *(str(p) for p in paths.run_dir.iterdir()),
        *(Path(f).name for f in profile.source.files),
    ]
    data += [s.name for s in stages]
    data += [m for s in stages for m in s.error_messages.values()]
    for value in sorted(data, key=len, reverse=True):
        pattern = "\x00?".join(re.escape(ch) for ch in value)
        text = re.sub(pattern, " ", text)
    text = re.sub(r"(?:[0-9a-f]\x00?){64}", " ", text)  # digests
    text = text.replace("\x00", " ")
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", " ", text)  # timestamps from run.json
    words = set(WORD.findall(text))
    leftover = _unexplained(words)
    assert not leftover, f"English left in the Chinese report: {leftover}"


def test_chinese_strings_hold_no_english_words() -> None:
    assert STRINGS["en"].keys() == STRINGS["zh"].keys()
    for key, value in STRINGS["zh"].items():
        words = set(WORD.findall(re.sub(r"\{[^}]*\}", "0", value)))
        assert not _unexplained(words), f"zh[{key!r}] holds {_unexplained(words)}"


def test_report_without_records_or_scrapes_still_renders(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    (paths.run_dir / "records.parquet").unlink()
    (paths.run_dir / "server_metrics.parquet").unlink()
    pdf = render_report(paths.profile, paths.run_dir, paths.plan, tmp_path / "bare.pdf")
    text, _ = _extract(pdf)
    assert "records.parquet is missing or empty" in text
    assert "Against the previous baseline" not in text
    assert "no burst and recovery stages" not in text or "Recovery after the burst" not in text


def test_concurrency_limit_reads_as_users(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    plan = build_plan()
    scenarios = [
        sc.model_copy(update={"unit": "users", "demand": 233.0, "per_instance_limit": 50.0})
        for sc in plan.scenarios
    ]
    limit_input = plan.inputs.limit.model_copy(update={"value": 50.0, "unit": "users"})
    inputs = plan.inputs.model_copy(update={"limit": limit_input})
    found = load_limit(paths.run_dir / "limit.json")  # the run the plan rests on: 50 users
    found = found.model_copy(update={"unit": "users", "feasible_max": 50.0})
    (paths.run_dir / "limit.json").write_text(found.model_dump_json(by_alias=True))
    paths.plan.write_text(
        plan.model_copy(update={"scenarios": scenarios, "inputs": inputs}).model_dump_json(
            by_alias=True
        )
    )
    for lang, expected in (
        ("en", "Serve a peak of 233 concurrent users"),
        ("zh", "233 个并发用户"),
    ):
        pdf = render_report(
            paths.profile, paths.run_dir, paths.plan, tmp_path / f"u-{lang}.pdf", lang=lang
        )
        first = _flat(PdfReader(pdf).pages[0].extract_text())
        assert expected in first
        assert "50 users" in first or "50 个并发用户" in first


def test_a_search_stopped_before_its_tolerance_says_so(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    # The report reads why the search stopped (limit.json `stopped`), never re-derives it.
    tight = build_limit().model_copy(update={"infeasible_min": 18.2, "stopped": "converged"})
    (paths.run_dir / "limit.json").write_text(tight.model_dump_json(by_alias=True))
    pdf = render_report(paths.profile, paths.run_dir, paths.plan, tmp_path / "tight.pdf")
    assert "stopped before its tolerance" not in _flat(_extract(pdf)[0])
    wide = build_limit().model_copy(
        update={"infeasible_min": 26.1, "stopped": "stopped at 4 levels"}
    )
    (paths.run_dir / "limit.json").write_text(wide.model_dump_json(by_alias=True))
    for lang, expected in (
        ("en", "The search stopped before its tolerance"),
        ("zh", "搜索在达到容差前停止"),
    ):
        pdf = render_report(
            paths.profile, paths.run_dir, paths.plan, tmp_path / f"w-{lang}.pdf", lang=lang
        )
        assert expected in _flat(_extract(pdf)[0])


def test_a_client_limited_search_says_the_limit_may_be_higher(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    limit = build_limit()
    levels = [
        lv.model_copy(update={"verdict": "invalid", "invalid": "lag p99 305 ms > 200 ms"})
        if lv.load == limit.infeasible_min
        else lv
        for lv in limit.levels
    ]
    (paths.run_dir / "limit.json").write_text(
        limit.model_copy(update={"levels": levels}).model_dump_json(by_alias=True)
    )
    pdf = render_report(paths.profile, paths.run_dir, paths.plan, tmp_path / "client.pdf")
    text = _flat(_extract(pdf)[0])
    assert "the load generator could not offer 18.3 req/s" in text
    assert "invalid (client lag)" in text  # the level table names it


def test_errors_by_class_are_named_with_counts_and_messages(english: Rendered) -> None:
    text = _flat(english.text)
    assert "Errors by class" in text
    _, stages, _, _ = build_run()
    failing = [st for st in stages if st.errors]
    assert failing
    for st in failing:
        for cls, n in st.errors_by_class.items():
            assert f"{st.name} {cls} {n}" in text, (st.name, cls, n)
    assert REFUSED_MESSAGE in text
    for lv in build_limit().levels:
        for cls, n in lv.errors_by_class.items():
            assert f"limit level {lv.load:g} req/s {cls} {n}" in text, (lv.load, cls, n)


GOLDEN = Path(__file__).parent / "golden"
UPDATE_GOLDEN = "CAPPLAN_UPDATE_GOLDEN"
SHA256 = re.compile(r"[0-9a-f]{64}")


def _page_texts(rendered: Rendered) -> str:
    """The text of every page as pdftotext reads it, in a form that does not depend on where
    the fixture was written: whitespace dropped (long paths wrap differently), the fixture's
    folder as <root>, sha256 digests (parquet bytes vary with the writer) as <sha256>."""
    tool = shutil.which("pdftotext")
    assert tool, "pdftotext (poppler-utils) is needed; scripts/test.sh installs it"
    out = subprocess.run([tool, str(rendered.pdf), "-"], capture_output=True, text=True, check=True)
    root = re.sub(r"\s+", "", str(rendered.paths.plan.parent.parent))
    pages = []
    for n, page in enumerate(out.stdout.split("\f")[: rendered.pages], start=1):
        flat = SHA256.sub("<sha256>", re.sub(r"\s+", "", page).replace(root, "<root>"))
        lines = [flat[i : i + 100] for i in range(0, len(flat), 100)]
        pages.append("\n".join([f"=== page {n} ===", *lines]))
    return "\n".join(pages) + "\n"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_texts_match_the_stored_ones(
    lang: str, english: Rendered, chinese: Rendered, request: pytest.FixtureRequest
) -> None:
    """The report of the fixed fixture reads exactly as stored in tests/reports/golden/.

    A change meant to alter the report regenerates them: CAPPLAN_UPDATE_GOLDEN=1 pytest
    tests/reports/test_render.py -k stored; review the diff of the .txt files.
    """
    import os

    rendered = english if lang == "en" else chinese
    path = GOLDEN / f"report-{lang}.txt"
    text = _page_texts(rendered)
    if os.environ.get(UPDATE_GOLDEN):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        import difflib

        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), text.splitlines(True), str(path), "rendered", n=1
            )
        )
        pytest.fail(f"the report's text changed:\n{diff[:4000]}")


def test_requests_in_flight_at_the_window_s_end_are_named(tmp_path: Path) -> None:
    """A passing level whose last requests were still running reads "468 / 522 (54 in flight
    ...)" beside its attainment, the errors table calls them in flight, not failures, and the
    highest completion rate says what it counts."""
    paths = write_fixture(tmp_path)
    limit = build_limit()
    levels = [
        lv.model_copy(
            update={
                "completed": lv.requests - 54,
                "censored": 54,
                "errors_by_class": {"cancelled": 54},
            }
        )
        if lv.load == limit.feasible_max
        else lv
        for lv in limit.levels
    ]
    (paths.run_dir / "limit.json").write_text(
        limit.model_copy(update={"levels": levels}).model_dump_json(by_alias=True)
    )
    for lang, expected in (
        (
            "en",
            [
                "468 / 522 (54 in flight at the window's end)",
                "Highest completion rate",
                "cancelled 54 still in flight when the load test stopped (not a failure)",
            ],
        ),
        (
            "zh",
            [
                "468 / 522（54 个在窗口结束时仍在进行）",
                "最高的完成速率",
                "cancelled 54 负载测试停止时仍在进行（不算失败）",
            ],
        ),
    ):
        pdf = render_report(
            paths.profile, paths.run_dir, paths.plan, tmp_path / f"f-{lang}.pdf", lang=lang
        )
        text = re.sub(r"\s+", "", _extract(pdf)[0])
        for phrase in expected:
            assert re.sub(r"\s+", "", phrase) in text, phrase


def test_the_length_classes_say_where_short_ends_as_the_profile_counts_it(
    english: Rendered, chinese: Rendered
) -> None:
    """The profile counts a prompt of up to 512 tokens as short (`<= 512`, profiles.lengths);
    the workload page said "< 512" (a bug hunt)."""
    for rendered in (english, chinese):
        flat = re.sub(r"\s+", "", rendered.text)
        assert "(<=512,>=4096)" in flat and "(<512," not in flat
