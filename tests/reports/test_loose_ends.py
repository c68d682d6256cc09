"""The report without loose ends (issue 61), read as a reader sees it (testkit.pdf_loose_ends):
on the fixture's report made to hold every trap the demo fell into (a fast answer, a level
stopped early, requests cancelled in flight, one user, long input paths, two routers' lines
through the same points), in English and Chinese; and the check itself fails on a page that
has each loose end."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen.canvas import Canvas

from contracts.limit import FastSearchRecord, LimitResult
from contracts.plan import Plan
from contracts.run import RunInfo, StageSummary
from reports import render_report
from testkit.pdf_loose_ends import loose_ends
from testkit.report_inputs import FixturePaths, write_fixture

DEEP = "a-folder-name-long-enough/that-the-appendix-has-to-wrap/its-input-paths"


def _trapped(root: Path) -> FixturePaths:
    """The fixture with the demo's traps: the fast search answered, the level at 24 req/s
    stopped early in the burst stage, 54 requests were cancelled in flight there, the recovery
    stage had one user."""
    paths = write_fixture(root / DEEP)
    limit = LimitResult.model_validate_json((paths.run_dir / "limit.json").read_text())
    fast = FastSearchRecord(
        stopped="converged", adequate=True, characterise_s=55.0, confirm_s=120.0,
        predicted_rps=17.9, limit_rps=17.4, interval=(17.1, 17.7),
        bias={"ttft:p95": 0.002}, levels=[(17.4, 1, 522)],
    )  # fmt: skip
    levels = [
        lv.model_copy(update={"abandoned_early": True, "stage": "burst"}) if lv.load == 24.0 else lv
        for lv in limit.levels
    ]
    limit = limit.model_copy(update={"method": "fast", "fast": fast, "levels": levels})
    (paths.run_dir / "limit.json").write_text(limit.model_dump_json(by_alias=True))
    stages = [StageSummary.model_validate(s) for s in json.loads(
        (paths.run_dir / "stages.json").read_text()
    )]  # fmt: skip
    burst = stages[1]
    stages[1] = burst.model_copy(
        update={
            "errors": burst.errors + 54,
            "errors_by_class": {**burst.errors_by_class, "cancelled": 54},
        }
    )
    stages[2] = stages[2].model_copy(update={"target_rate_rps": None, "target_users": 1})
    (paths.run_dir / "stages.json").write_text(
        "[" + ",".join(s.model_dump_json() for s in stages) + "]"
    )
    run = RunInfo.model_validate_json((paths.run_dir / "run.json").read_text())
    plan = run.plan.model_copy(
        update={
            "stages": [
                *run.plan.stages[:-1],
                run.plan.stages[-1].model_copy(
                    update={"kind": "closed", "rate_rps": None, "users": 1}
                ),
            ]
        }
    )
    run = run.model_copy(update={"plan": plan})
    (paths.run_dir / "run.json").write_text(run.model_dump_json(by_alias=True))
    # both routers meet the SLO alike at every count: their lines would coincide
    the_plan = Plan.model_validate_json(paths.plan.read_text())
    fleet = the_plan.checks.fleet
    assert fleet is not None
    same = [p.model_copy(update={"attainment": 1.0}) for p in fleet.points]
    the_plan = the_plan.model_copy(
        update={"checks": the_plan.checks.model_copy(
            update={"fleet": fleet.model_copy(update={"points": same})}
        )}
    )  # fmt: skip
    paths.plan.write_text(the_plan.model_dump_json(by_alias=True))
    return paths


def _inputs(paths: FixturePaths) -> list[str]:
    files = [paths.profile, paths.plan, *paths.run_dir.iterdir()]
    return [str(f) for f in files] + [f.name for f in files]


@pytest.fixture(scope="module")
def trapped(tmp_path_factory: pytest.TempPathFactory) -> tuple[FixturePaths, dict[str, Path]]:
    root = tmp_path_factory.mktemp("loose")
    paths = _trapped(root)
    pdfs = {
        lang: render_report(
            paths.profile, paths.run_dir, paths.plan, root / f"report-{lang}.pdf", lang=lang
        )
        for lang in ("en", "zh")
    }
    return paths, pdfs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_report_has_no_loose_ends(
    trapped: tuple[FixturePaths, dict[str, Path]], lang: str
) -> None:
    paths, pdfs = trapped
    problems = loose_ends(pdfs[lang], lang=lang, method="fast", paths=_inputs(paths))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("lang", "stopped", "cancelled_head", "errors_head"),
    [
        ("en", "stopped early (24 asked)", "Cancelled: still in flight", "Errors by class"),
        ("zh", "提前停止(要求 24)", "已取消:阶段结束时仍在进行", "按类别的错误"),
    ],
)
def test_stopped_and_cancelled_read_as_such(
    trapped: tuple[FixturePaths, dict[str, Path]],
    lang: str,
    stopped: str,
    cancelled_head: str,
    errors_head: str,
) -> None:
    """The stage the level stopped early says so beside its offered load, and its cancelled
    requests sit in their own table, not among the errors by class."""
    _, pdfs = trapped
    with pymupdf.open(pdfs[lang]) as doc:
        text = "\n".join(page.get_text("text") for page in doc)
    flat = "".join(text.split())  # lines may break anywhere in Chinese

    def squeezed(s: str) -> str:
        return "".join(s.split())

    assert squeezed(stopped) in flat
    errors = flat[flat.index(squeezed(errors_head)) : flat.index(squeezed(cancelled_head))]
    assert "cancelled" not in errors
    assert "cancelled54" in flat[flat.index(squeezed(cancelled_head)) :]


def _planted(pdf: Path) -> None:
    """A page with every loose end, and a second page with a heading at its foot."""
    canvas = Canvas(str(pdf), pagesize=A4)
    canvas.setFont("Helvetica", 9)
    canvas.drawString(60, 780, "Serve a peak of 5.85 req/s within ttft:p95<=2s on 1 instances.")
    canvas.setFont("Helvetica-Bold", 8)
    for x, head in ((60, "Load"), (160, "ttft:p95")):
        canvas.drawString(x, 740, head)
    canvas.setFont("Helvetica", 8)
    canvas.drawString(60, 728, "4.59 req/s")
    canvas.drawString(160, 728, "0.357")
    canvas.drawString(60, 700, "/runs/demo-files/limit-run/server_metrics.parqu")
    canvas.drawString(60, 690, "et")
    canvas.drawString(60, 660, "Assumptions and method")
    canvas.drawString(60, 650, "the search bracketed the load exponentially")
    canvas.setFont("Helvetica-Bold", 10.5)
    canvas.drawString(60, 70, "Caveats")
    canvas.showPage()
    canvas.setFont("Helvetica", 9)
    canvas.drawString(60, 780, "a caveat that spilled over")
    canvas.showPage()
    canvas.drawString(60, 780, "the last page")
    canvas.save()


def test_the_check_finds_each_loose_end(tmp_path: Path) -> None:
    pdf = tmp_path / "planted.pdf"
    _planted(pdf)
    problems = "\n".join(
        loose_ends(pdf, method="fast", paths=["/runs/demo-files/limit-run/server_metrics.parquet"])
    )
    assert "page 1: heading 'Caveats' alone at the page's foot" in problems
    assert "page 2: nearly empty" in problems
    assert "page 3" not in problems  # the last page may be short
    assert "'0.357' under 'ttft:p95' has no unit" in problems
    assert "'4.59'" not in problems  # a column with its unit is fine
    assert "broken inside a name: 'server_metrics.parqu' / 'et'" in problems
    assert "'1 instances'" in problems
    assert "the SLO is given only as ttft:p95<=2s" in problems
    assert "describes the measured search" in problems
    assert "does not name the fast search" in problems


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_heading_moves_to_the_page_with_its_text(tmp_path: Path, lang: str) -> None:
    """A heading whose section would start at the foot of a page goes over with its first
    paragraph (keep-with-next), as the demo's "Caveats" did not."""
    from reportlab.lib.units import mm
    from reportlab.platypus import Spacer

    from reports import words_for
    from reports.layout import MARGIN, PAGE_H, Layout, write_document

    layout = Layout(words_for(lang))
    frame_pt = PAGE_H - MARGIN - 18 * mm - 12  # write_document's frame, less its padding
    story = [
        Spacer(1, frame_pt - 30),  # room for the heading (24 pt), not for its first line
        layout.para("Caveats", layout.styles.h2),
        *[layout.para("• a caveat that needs a line of its own") for _ in range(6)],
    ]
    pdf = write_document(
        tmp_path / "h.pdf", story, layout.words, title="t", subject="s", footer="f"
    )
    assert not [p for p in loose_ends(pdf, lang=lang) if "alone at the page's foot" in p]


def test_the_stage_table_s_heads_stay_whole(trapped: tuple[FixturePaths, dict[str, Path]]) -> None:
    """With its Cancelled and Attainment columns the stage table still sets every head on
    one line ("Cancell" / "ed" once)."""
    _, pdfs = trapped
    with pymupdf.open(pdfs["en"]) as doc:
        words = {w[4] for page in doc for w in page.get_text("words")}
    heads = ("Stage", "Role", "Duration", "Offered", "Achieved", "Errors", "Recovery")
    assert {*heads, "Cancelled", "Attainment"} <= words


def test_a_bold_word_ending_a_table_cell_is_no_heading(tmp_path: Path) -> None:
    """The demo's page 1 once ended on the risk table's label "Growth beyond the / plan"
    (bold, heading-sized, in a cell right of the badge): the check took "plan" for a heading
    alone at the page's foot. A heading starts at the text's left margin."""
    pdf = tmp_path / "cell.pdf"
    canvas = Canvas(str(pdf), pagesize=A4)
    canvas.setFont("Helvetica", 9)
    canvas.drawString(60, 780, "The three biggest risks")
    canvas.drawString(60, 90, "LOW")
    canvas.drawString(220, 90, "The plan covers x1 growth.")
    canvas.setFont("Helvetica-Bold", 10.5)
    canvas.drawString(110, 90, "Growth beyond the")
    canvas.drawString(110, 76, "plan")
    canvas.showPage()
    canvas.setFont("Helvetica", 9)
    canvas.drawString(60, 780, "the next page, full of text")
    canvas.drawString(60, 200, "down to here")
    canvas.showPage()
    canvas.drawString(60, 780, "the last page")
    canvas.save()
    assert not [p for p in loose_ends(pdf) if "alone at the page's foot" in p]


def test_a_chart_tick_under_a_latency_column_is_not_its_cell() -> None:
    """The demo's Chinese page 4 (CI, 2026-12-06): the recovery chart below the search-levels
    table put its "450" s axis tick exactly under the table's ttft:p95 head. A column runs
    down to the first line in another type size; a bare number in the table still counts."""
    from testkit.pdf_loose_ends import Line, unitless_latency

    def line(words: tuple[str, ...], x: float, top: float, size: float) -> Line:
        return Line(words=words, xs=tuple(x + 15 * k for k in range(len(words))), top=top,
                    bottom=top + size, size=size)  # fmt: skip

    head = line(("ttft:p95",), 212.0, 375.0, 7.8)
    table = [line(("236", "ms"), 212.0, 394.0, 7.8), line(("3.1", "s"), 212.0, 442.0, 7.8)]
    chart = [line(("突发后的恢复",), 88.0, 470.0, 9.0), line(("450",), 212.0, 560.0, 6.5)]
    assert unitless_latency([head, *table, *chart], 4) == []
    bare = line(("0.218",), 212.0, 418.0, 7.8)  # a cell without its unit: still found
    assert unitless_latency([head, *table, bare, *chart], 4) == [
        "page 4: '0.218' under 'ttft:p95' has no unit"
    ]
