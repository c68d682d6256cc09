"""Every page of the baseline (with its what-if and compare section), the section alone and a
deliberately broken page, read as a reader sees them (testkit.pdf_check): no text outside the
page, over other text or cut by a shaded box's edge, every font other than the standard 14
embedded, and no English sentence in a Chinese document. The review's PDFs are checked where
they are made (tests/planner/review/test_review_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen.canvas import Canvas

from contracts.finding import FINDINGS_EN, Finding
from contracts.plan import Plan
from planner.capacity.arithmetic import HostRule
from planner.fleet.check import fleet_verdict
from testkit.pdf_check import english_runs, page_problems
from testkit.report_inputs import build_run
from tests.reports.test_findings import SAMPLE
from tests.reports.which_inputs import Inputs, run_cli


def _with_findings(plan_path: Path, out: Path) -> Path:
    """The fixture's plan with every note the planner can write, its host rule and its fleet
    verdict as findings (as `capplan plan` writes them)."""
    plan = Plan.model_validate_json(plan_path.read_text())
    notes = [
        Finding(key=key, values={k: v for k, v in SAMPLE.items() if "{" + k in text})
        for key, text in FINDINGS_EN.items()
        if key.startswith("note.")
    ]
    rule = HostRule()
    fleet = plan.checks.fleet
    assert fleet is not None
    verdict = fleet_verdict(fleet.points, plan.instances)
    plan = plan.model_copy(
        update={
            "notes": [n.english() for n in notes],
            "note_findings": notes,
            "resources": plan.resources.model_copy(
                update={"rule": rule.describe(), "rule_finding": rule.finding()}
            ),
            "checks": plan.checks.model_copy(
                update={
                    "fleet": fleet.model_copy(
                        update={"verdict": verdict.english(), "verdict_finding": verdict}
                    )
                }
            ),
        }
    )
    out.write_text(plan.model_dump_json(by_alias=True, indent=2))
    return out


@pytest.fixture(scope="module")
def documents(inputs: Inputs) -> dict[str, Path]:
    p = inputs.paths
    root = p.plan.parent.parent
    plan = _with_findings(p.plan, root / "plan-findings.json")
    out = {}
    for lang in ("en", "zh"):
        full = root / f"check-full-{lang}.pdf"
        run_cli(
            "report", "--profile", str(p.profile), "--run", str(p.run_dir), "--plan", str(plan),
            "--previous", str(p.previous), "--whatif", str(inputs.whatif),
            "--compare", str(inputs.compare), "--lang", lang, "-o", str(full),
        )  # fmt: skip
        which = root / f"check-which-{lang}.pdf"
        run_cli(
            "report", "--whatif", str(inputs.whatif), "--compare", str(inputs.forced),
            "--lang", lang, "-o", str(which),
        )  # fmt: skip
        out[f"full-{lang}"], out[f"which-{lang}"] = full, which
    return out


def _data() -> list[str]:
    """Words that come from the inputs, not from the report: the servers' error messages."""
    _, stages, _, _ = build_run()
    return [m for s in stages for m in s.error_messages.values()]


@pytest.mark.parametrize("name", ["full-en", "full-zh", "which-en", "which-zh"])
def test_every_page_reads_cleanly(documents: dict[str, Path], name: str) -> None:
    problems = page_problems(documents[name], english=name.endswith("zh"), data=_data())
    assert not problems, "\n".join(problems[:20])


def test_the_check_fails_on_a_broken_page(tmp_path: Path) -> None:
    pdf = tmp_path / "broken.pdf"
    canvas = Canvas(str(pdf), pagesize=A4)
    width, height = A4
    canvas.setFont("Helvetica", 12)
    canvas.drawString(100, 700, "Overlapping words")
    canvas.drawString(103, 701, "drawn twice")
    canvas.drawString(width - 30, 400, "past the right edge")
    canvas.setFillColor(colors.lightgrey)
    canvas.rect(50, 500, 300, 40, fill=1, stroke=0)
    canvas.setFillColor(colors.black)
    canvas.drawString(60, 535, "Title on the box's edge")
    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    canvas.setFont("STSong-Light", 12)
    canvas.drawString(100, 300, "容量基线 the limit is given, not measured")
    canvas.save()
    problems = "\n".join(page_problems(pdf, english=True))
    assert "'drawn' overlaps 'Overlapping'" in problems
    assert "'edge' outside the page" in problems
    assert "'Title' is cut by the edge of a shaded box" in problems
    assert "font not embedded: STSong-Light" in problems
    assert "English: " in problems and "the limit is given not measured" in problems


def test_english_runs_keep_units_names_and_expressions() -> None:
    kept = "上限 17.4 req/s，ttft:p95<=2s，H100-80GB x 1，NVIDIA DGX H100 的比例"
    assert english_runs(kept) == []
    assert english_runs("规划 5 个 llama-3.1-8b 实例 at the limit，测得") == ["at the limit"]
    assert english_runs("错误：injected fault: too many requests", data=["injected fault"]) == [
        "too many requests"
    ]


def test_labels_of_close_reference_lines_stack_instead_of_overlapping(tmp_path: Path) -> None:
    """An SLO line and a steady p95 a label's height apart (the demo's recovery chart, 40 s
    axis, 2 s and 0.6 s lines): their labels stack; the page check found them overlapping."""
    from reportlab.graphics import renderPDF

    from reports.axes import Axis
    from reports.charts import single

    drawing, panel = single(
        400, 200, Axis(0, 600, "s"), Axis(0, 40, "s"), font="Helvetica", title="recovery"
    )
    panel.hline(2.0, colors.red, text="SLO 2 s")
    panel.hline(0.6, colors.grey, text="steady p95")
    drawing.add(panel.render())
    pdf = tmp_path / "chart.pdf"
    canvas = Canvas(str(pdf), pagesize=A4)
    renderPDF.draw(drawing, canvas, 100, 400)
    canvas.save()
    assert not [p for p in page_problems(pdf) if "overlaps" in p]
