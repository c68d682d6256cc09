"""`capplan report --whatif/--compare`: the "Which configuration" section, from a whatif.json
and compare.json written by the real commands on the report fixture's profile, in English and
Chinese; its numbers are the JSON's, its lessons state the JSON's costs.

The inputs take a few seconds: a whatif of 2 GPUs x prefix caching in 10-virtual-second levels,
and one limit search against the engine model (the L40S run that compare sets beside the
fixture's measured H100 run).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from pypdf import PdfReader
from typer.testing import CliRunner

from capplan.cli import app
from contracts.whatif import CLEAR_CHANGE
from reports.i18n import STRINGS
from tests.reports.which_inputs import PEAK_RPS, Inputs, run_cli


def _text(pdf: Path) -> tuple[str, int]:
    """The PDF's text with every run of whitespace as one space, and its page count."""
    reader = PdfReader(pdf)
    text = " ".join(page.extract_text() for page in reader.pages)
    return re.sub(r"\s+", " ", text), len(reader.pages)


def _usd(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


@pytest.fixture(scope="module")
def full_en(inputs: Inputs) -> tuple[str, int]:
    p = inputs.paths
    out = p.plan.parent.parent / "full-en.pdf"
    run_cli(
        "report", "--profile", str(p.profile), "--run", str(p.run_dir), "--plan", str(p.plan),
        "--whatif", str(inputs.whatif), "--compare", str(inputs.compare), "-o", str(out),
    )  # fmt: skip
    return _text(out)


def test_the_section_sits_between_the_checks_and_the_method(full_en: tuple[str, int]) -> None:
    text, _ = full_en
    en = STRINGS["en"]
    checks = text.index(en["checks_heading"])
    which = text.index(en["which_heading"])
    method = text.index(en["method_heading"])
    assert checks < which < method
    assert en["which_whatif_heading"] in text and en["which_compare_heading"] in text
    assert en["which_chart"] in text


def test_the_ranked_table_s_headings_break_between_words_only(full_en: tuple[str, int]) -> None:
    """A column too narrow for its heading splits a word ("Ran k", "GPU s"): each heading
    reads whole, its words separated by spaces at most."""
    text, _ = full_en
    en = STRINGS["en"]
    whatif = text[text.index(en["which_whatif_heading"]) : text.index(en["which_compare_heading"])]
    keys = ("rank", "candidate", "limit_predicted", "binding", "instances", "gpus", "cost")
    for key in (f"which_col_{k}" for k in keys):
        assert re.search(rf"(?<!\w){re.escape(en[key])}(?!\w)", whatif), en[key]


def test_whatif_numbers_and_lessons_are_the_json_s(
    inputs: Inputs, full_en: tuple[str, int]
) -> None:
    text, _ = full_en
    data = json.loads(inputs.whatif.read_text())
    ranked = sorted((c for c in data["candidates"] if c["rank"]), key=lambda c: c["rank"])
    assert len(ranked) == 4
    for c in ranked:  # a predicted limit with its interval
        row = (
            f"{c['rank']} {c['label']} {c['limit_rps']:.3g} req/s ({c['limit_low_rps']:.3g}–"
            f"{c['limit_high_rps']:.3g}) {c['binding']} "
            f"{c['instances']} {c['gpus']} {_usd(c['monthly_cost_usd'])} "
            f"{_usd(c['usd_per_million_output_tokens'])}"
        )
        assert row in text, row
    assert sum(1 for c in ranked if c["pareto"]) >= 1
    best = ranked[0]
    assert (
        f"{best['label']} serves the peak of 42 req/s within the SLO for the least: "
        f"{best['instances']} instance(s), {best['gpus']} GPU(s), "
        f"{_usd(best['monthly_cost_usd'])} per month." in text
    )
    # the other GPU's cheapest fleet, and how much more it costs
    other = next(c for c in ranked if c["gpu"] != best["gpu"])
    saving = round(100 * (1 - best["monthly_cost_usd"] / other["monthly_cost_usd"]))
    assert (
        f"a fleet of {best['gpu']} costs {saving} % less than one of {other['gpu']} at the same "
        f"SLO ({best['instances']} × {best['gpu']} for {_usd(best['monthly_cost_usd'])} against "
        f"{other['instances']} × {other['gpu']} for {_usd(other['monthly_cost_usd'])}" in text
    )
    # one such sentence per other GPU: candidates on the same GPU are not set against each other
    assert text.count("For your traffic, a fleet of") == len({c["gpu"] for c in ranked}) - 1
    (lesson,) = [x for x in data["lessons"] if x["knob"] == "prefix_caching"]
    change = f"{lesson['limit_change'] * 100:+.0f} %"
    assert f"Prefix caching: on instead of off changes the limit by {change}" in text
    # the fixture's profile has 46 % of its prompt tokens in shared blocks: caching pays
    assert lesson["limit_change"] > CLEAR_CHANGE and "— it pays off." in text
    assert re.sub(r"\s+", " ", lesson["figure"]) in text


def test_compare_rows_and_saving_are_the_json_s(inputs: Inputs, full_en: tuple[str, int]) -> None:
    text, _ = full_en
    data = json.loads(inputs.compare.read_text())
    assert not data["forced"]
    rows = sorted(data["rows"], key=lambda r: r["rank"])
    for r in rows:  # the modelled L40S run's limit with its interval, the measured one's alone
        iv = r["predicted"]
        assert (iv is None) == (r["label"] == "measured H100"), r
        interval = f" ({iv['low']:.3g}–{iv['high']:.3g})" if iv else ""
        row = (
            f"{r['rank']} {r['label']} {r['limit']:.3g} req/s{interval} {r['binding']} "
            f"{r['instances']} {r['gpus']} {_usd(r['monthly_cost_usd'])} "
            f"{_usd(r['usd_per_million_output_tokens'])}"
        )
        assert row in text, row
        said = f"Predicted, not measured: the limit of {r['label']}, {r['limit']:.3g} req/s,"
        assert (said in text) == (iv is not None), said
    (modelled,) = [r for r in rows if r["predicted"]]
    iv = modelled["predicted"]
    assert iv["low"] < modelled["limit"] < iv["high"]
    assert (
        f"is the engine model's (its load test ran against capplan's engine emulator); published "
        f"server results put a GPU's measured limit between {iv['low']:.3g} req/s and "
        f"{iv['high']:.3g} req/s (the p10-p90 spread of all {iv['source']['rows']} published "
        f"results; vllm/ada has {iv['source']['class_rows']}, too few for its own)."
        in text.replace("- ", "-")
    ), text
    best, other = rows
    saving = round(100 * (1 - best["monthly_cost_usd"] / other["monthly_cost_usd"]))
    assert f"{best['label']} costs {saving} % less than {other['label']} at the same SLO" in text
    assert "NOT COMPARABLE" not in text


def test_the_section_alone_in_chinese_marks_a_forced_compare(
    inputs: Inputs, tmp_path: Path
) -> None:
    out = tmp_path / "which-zh.pdf"
    run_cli(
        "report", "--whatif", str(inputs.whatif), "--compare", str(inputs.forced),
        "--lang", "zh", "-o", str(out),
    )  # fmt: skip
    text, pages = _text(out)
    zh = STRINGS["zh"]
    for key in ("which_whatif_heading", "which_compare_heading", "which_lessons_heading"):
        assert zh[key] in text, key
    assert zh["which_table_heading_forced"] in text
    assert "不可比较" in text and "SLO 'ttft:p95<=3s' differs" in text
    assert STRINGS["en"]["which_heading"] not in text
    data = json.loads(inputs.whatif.read_text())
    for c in data["candidates"]:
        assert _usd(c["monthly_cost_usd"]) in text
    best = min(data["candidates"], key=lambda c: c["rank"])
    assert f"每月 {_usd(best['monthly_cost_usd'])}" in text
    # the page renders (pdftoppm) and is not blank
    tool = shutil.which("pdftoppm")
    assert tool, "pdftoppm (poppler-utils) is needed; scripts/test.sh installs it"
    subprocess.run([tool, "-r", "30", "-png", str(out), str(tmp_path / "p")], check=True)
    pngs = sorted(tmp_path.glob("p-*.png"))
    assert len(pngs) == pages
    for png in pngs:
        with Image.open(png) as image:
            lo, hi = image.convert("L").getextrema()
        assert lo < 128 < hi


def test_the_section_alone_in_english_names_the_forced_mismatch(
    inputs: Inputs, tmp_path: Path
) -> None:
    out = tmp_path / "which-en.pdf"
    run_cli("report", "--compare", str(inputs.forced), "-o", str(out))
    text, _ = _text(out)
    assert "Which configuration: chat" in text
    assert "NOT COMPARABLE" in text and "Ranked candidates (not comparable, --force)" in text
    assert STRINGS["en"]["which_whatif_heading"] not in text


def test_a_forced_compare_says_same_slo_only_of_runs_measured_alike(inputs: Inputs) -> None:
    """A forced compare's report said "A costs 0 % less than B at the same SLO" of a run
    measured under another SLO at the same cost (a bug hunt). A tie reads as a tie, and a
    saving against a run not measured alike says so instead of "at the same SLO"."""
    from dataclasses import replace

    from reports import words_for
    from reports.layout import Layout
    from reports.pages.which import _gap_sentence
    from reports.which_data import CostGap, load_sections

    (section,) = load_sections(compare=inputs.forced)
    odd = {r.label: r.mismatched for r in section.rows}
    assert odd == {"chat-h100-sbr llama-3.1-8b": False, "other-slo llama-3.1-8b": True,
                   "l40s llama-3.1-8b": False}, odd  # fmt: skip
    layout = Layout(words_for("en"))
    said = [_gap_sentence(layout, section, gap) for gap in section.cost_gaps]
    assert said[0].startswith("chat-h100-sbr llama-3.1-8b and other-slo llama-3.1-8b cost the same")
    assert "at the same SLO" in said[1] and " 0 % less" not in " ".join(said)
    best, other = section.rows[0], replace(section.rows[1], monthly_cost_usd=10_000.0)
    gap = CostGap(cheaper=best, dearer=other, saving_frac=0.127)
    forced = _gap_sentence(layout, section, gap)
    assert "at the same SLO" not in forced and "not measured alike" in forced


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "{profile}"], "missing --plan"),
        (["--whatif", "{compare}"], 'expected "schema": "capplan.whatif/1"'),
        (["--compare", "{missing}"], "compare not found"),
        ([], "missing --profile, --plan"),
        (["--profile", "{profile}", "--plan", "{profile}"], 'expected "schema": "capplan.plan/1"'),
    ],
)
def test_bad_which_input_exits_2_with_a_message(
    inputs: Inputs, tmp_path: Path, args: list[str], message: str
) -> None:
    values = {
        "profile": str(inputs.paths.profile),
        "compare": str(inputs.compare),
        "missing": str(tmp_path / "nope.json"),
    }
    argv = ["report", *(a.format(**values) for a in args), "-o", str(tmp_path / "x.pdf")]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.replace("│", " ").split())
    assert message in flat and "Traceback" not in result.output


def test_calibration_errors_of_a_calibrated_whatif_are_shown(
    inputs: Inputs, tmp_path: Path
) -> None:
    # A calibrated whatif takes minutes; the column is read from whatif.json as it is written.
    from contracts.whatif import Whatif

    data = Whatif.model_validate_json(inputs.whatif.read_text())
    errors = [0.123, 0.0456, 0.5, 0.25]
    calibrated = data.model_copy(
        update={
            "candidates": [
                c.model_copy(update={"calibration_error": e})
                for c, e in zip(data.candidates, errors, strict=True)
            ],
            "calibration_note": "mean relative error 12.3% (uncalibrated 40.0%)",
        }
    )
    path = tmp_path / "calibrated.json"
    path.write_text(calibrated.model_dump_json(by_alias=True))
    out = tmp_path / "cal.pdf"
    run_cli("report", "--whatif", str(path), "-o", str(out))
    text, _ = _text(out)
    assert "Calibration error" in text
    for c, e in zip(calibrated.candidates, errors, strict=True):
        assert f"{_usd(c.usd_per_million_output_tokens or 0)} {e * 100:.1f} %" in text
    assert "Calibrated on a measured limit: mean relative error 12.3% (uncalibrated 40.0%)" in text


def test_a_whatif_where_nothing_meets_the_slo_says_so(inputs: Inputs, tmp_path: Path) -> None:
    whatif = tmp_path / "none.json"
    run_cli(
        "whatif", "--profile", str(inputs.paths.profile), "--slo", "ttft:p95<=1ms",
        "--gpu", "L40S-48GB", "--level-duration", "10", "--peak-rps", PEAK_RPS, "-o", str(whatif),
        code=1,  # no candidate has a limit: the file holds why, the exit code says so
    )  # fmt: skip
    (candidate,) = json.loads(whatif.read_text())["candidates"]
    assert candidate["limit_rps"] is None and candidate["rank"] is None
    out = tmp_path / "none.pdf"
    run_cli("report", "--whatif", str(whatif), "-o", str(out))
    text, _ = _text(out)
    assert f"{candidate['label']}: the SLO is met at no tested load." in text
    assert STRINGS["en"]["which_chart"] not in text  # nothing to draw
    assert "serves the peak" not in text


def test_whatif_format_json_prints_the_document_for_scripts(inputs: Inputs, tmp_path: Path) -> None:
    whatif = tmp_path / "whatif.json"
    result = CliRunner().invoke(
        app,
        [
            "whatif", "--profile", str(inputs.paths.profile), "--slo", "ttft:p95<=2s",
            "--gpu", "L40S-48GB", "--level-duration", "10", "--peak-rps", PEAK_RPS,
            "-o", str(whatif), "--format", "json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(whatif.read_text())
    assert f"wrote {whatif}" in result.stderr


def test_a_whatif_s_first_page_says_predicted_not_measured_with_the_json_s_interval(
    inputs: Inputs, tmp_path: Path
) -> None:
    data = json.loads(inputs.whatif.read_text())
    ranked = sorted((c for c in data["candidates"] if c["rank"]), key=lambda c: c["rank"])
    for c in ranked:  # every predicted limit carries its interval, around it
        assert c["limit_low_rps"] < c["limit_rps"] < c["limit_high_rps"], c["label"]
        assert "published" in c["limit_interval_basis"]
        printed = (
            f"{c['label']}: predicted, not measured: {c['limit_rps']:.3g} req/s (interval "
            f"{c['limit_low_rps']:.3g}-{c['limit_high_rps']:.3g};"
        )
        assert printed in re.sub(r"\s+", " ", inputs.whatif_output), printed
    out = tmp_path / "which-whatif.pdf"
    run_cli("report", "--whatif", str(inputs.whatif), "-o", str(out))
    first = re.sub(r"\s+", " ", PdfReader(out).pages[0].extract_text()).replace("- ", "-")
    best = ranked[0]
    src = best["limit_interval_source"]
    # the source as it is: the fixture's engine (vLLM) has no published rows on its GPUs, so
    # the spread is the overall one, and the sentence says so rather than "its class"
    assert src["basis"] == "overall" and src["class_key"] == f"vllm/{_GPU_CLASS[best['gpu']]}"
    source = (
        f"the p10-p90 spread of all {src['rows']} published results; {src['class_key']} has "
        f"{src['class_rows']}, too few for its own"
    )
    assert (
        f"Predicted, not measured: {best['label']} holds {best['limit_rps']:.3g} req/s per "
        f"instance in the engine model; published server results put the measured limit "
        f"between {best['limit_low_rps']:.3g} req/s and {best['limit_high_rps']:.3g} req/s "
        f"({source})." in first
    ), first
    zh = tmp_path / "which-whatif-zh.pdf"
    run_cli("report", "--whatif", str(inputs.whatif), "--lang", "zh", "-o", str(zh))
    first_zh = re.sub(r"\s+", "", PdfReader(zh).pages[0].extract_text())
    assert (
        f"预测值,未经实测:引擎模型预测{best['label'].replace(' ', '')}每实例承载"
        f"{best['limit_rps']:.3g}req/s;按公开服务结果,实测上限应在{best['limit_low_rps']:.3g}"
        f"req/s至{best['limit_high_rps']:.3g}req/s之间(全部{src['rows']}个公开结果的p10-p90分布;"
        in first_zh
    ), first_zh


_GPU_CLASS = {"H100-80GB": "hopper", "L40S-48GB": "ada"}


def test_a_compare_of_measured_limits_says_nothing_predicted(
    inputs: Inputs, tmp_path: Path
) -> None:
    p = inputs.paths
    measured = tmp_path / "measured.json"
    other = p.run_dir.parent / "other-slo"  # the fixture's measured limit under another SLO
    run_cli(
        "compare", str(p.run_dir), str(other), "--profile", str(p.profile), "--force",
        "--peak-rps", PEAK_RPS, "-o", str(measured),
    )  # fmt: skip
    out = tmp_path / "which-compare.pdf"
    run_cli("report", "--compare", str(measured), "-o", str(out))
    text, _ = _text(out)
    assert STRINGS["en"]["which_compare_heading"] in text
    assert "Predicted, not measured" not in text and "published server results" not in text
