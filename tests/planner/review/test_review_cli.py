"""`capplan review` end to end on the shipped example: three services, English and Chinese,
fleet totals against plans built one by one, and the change against a previous review."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

from capplan.cli import app
from planner.capacity.arithmetic import parse_limit
from planner.capacity.plan import PlanOptions, build_plan
from planner.review.build import compare, load_previous, load_service_profile
from planner.review.config import load_review
from reports.review.words import REVIEW_STRINGS
from testkit.pdf_check import page_problems
from testkit.pdf_loose_ends import loose_ends

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "review.yaml"


@pytest.fixture(scope="module")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review")
    shutil.copy(EXAMPLE, root / "review.yaml")
    # Last quarter: chat grew 1.0x (not 1.3x) and there was no batch service.
    old = yaml.safe_load(EXAMPLE.read_text())
    old["name"] = "2026-Q3"
    old["services"] = [s for s in old["services"] if s["name"] != "batch-summaries"]
    old["services"][0]["growth"] = 1.0
    (root / "old.yaml").write_text(yaml.safe_dump(old))
    runner = CliRunner()
    q3 = str(root / "q3.json")
    for args in (
        [str(root / "old.yaml"), "-o", str(root / "q3.pdf")],
        [str(root / "review.yaml"), "-o", str(root / "q4.pdf"), "--previous", q3],
        [
            str(root / "review.yaml"),
            "-o",
            str(root / "q4-zh.pdf"),
            "--lang",
            "zh",
            "--previous",
            q3,
        ],
    ):
        result = runner.invoke(app, ["review", *args])
        assert result.exit_code == 0, result.output
    return root


def test_fleet_totals_equal_plans_built_one_by_one(reviews: Path) -> None:
    spec = load_review(EXAMPLE)
    review = json.loads((reviews / "q4.json").read_text())
    assert review["schema"] == "capplan.review/1"
    instances = gpus = 0
    cost = 0.0
    by_type: dict[str, int] = {}
    for s in spec.services:
        plan = build_plan(
            load_service_profile(s, EXAMPLE.parent),
            parse_limit(s.limit, s.slo),
            PlanOptions(
                profile_path="x",
                slo=s.slo,
                growth=(s.growth or 1.0,),
                headroom=s.headroom,
                redundancy=s.redundancy,
                gpu=s.gpu,
                model=s.model,
                tp=s.tp,
                gpu_hour_price_usd=s.gpu_hour_price_usd,
                fleet=False,
            ),
        )
        instances += plan.instances
        gpus += plan.resources.gpus
        cost += plan.cost.monthly_usd
        by_type[plan.resources.gpu] = by_type.get(plan.resources.gpu, 0) + plan.resources.gpus
    fleet = review["fleet"]
    assert (fleet["services"], fleet["instances"], fleet["gpus"]) == (3, instances, gpus)
    assert fleet["monthly_cost_usd"] == pytest.approx(cost)
    assert fleet["gpus_by_type"] == by_type
    h100 = next(p for p in review["pools"] if p["gpu"] == "H100-80GB")
    # chat and rag each keep one spare; shared, one spare covers both.
    assert h100["spare_gpus_per_service"] == 2 and h100["spare_gpus_shared"] == 1
    assert h100["gpus_shared_spares"] == h100["gpus_per_service_spares"] - 1
    assert h100["monthly_cost_shared_usd"] == pytest.approx(h100["monthly_cost_usd"] - 2.99 * 730)


def test_change_against_previous_review(reviews: Path) -> None:
    old = {s["name"]: s for s in json.loads((reviews / "q3.json").read_text())["services"]}
    new = json.loads((reviews / "q4.json").read_text())
    by_name = {s["name"]: s for s in new["services"]}
    chat = by_name["chat"]
    assert chat["change"]["status"] == "changed"
    assert chat["change"]["instances"] == chat["instances"] - old["chat"]["instances"] > 0
    assert by_name["rag"]["change"]["instances"] == 0
    # rag's inputs are the same in both quarters: not "changed" with +0 / +$0 (a bug hunt)
    assert by_name["rag"]["change"]["status"] == "unchanged"
    assert by_name["batch-summaries"]["change"]["status"] == "new"
    change = new["change"]
    assert change["previous_name"] == "2026-Q3"
    assert change["new_services"] == ["batch-summaries"] and change["removed_services"] == []
    assert change["instances"] == new["fleet"]["instances"] - sum(
        s["instances"] for s in old.values()
    )
    assert any(d["role"] == "previous" for d in new["inputs"])


def test_a_service_is_unchanged_only_where_its_inputs_and_count_are(reviews: Path) -> None:
    """Against itself every service is unchanged; a service whose headroom moved but whose
    count did not is changed, +0 instances."""
    review = load_previous(reviews / "q4.json")
    assert {s.change.status for s in compare(review, review).services if s.change} == {"unchanged"}
    rag = next(s for s in review.services if s.name == "rag")
    inputs = rag.plan.inputs.model_copy(update={"headroom": rag.plan.inputs.headroom + 0.01})
    moved = rag.model_copy(update={"plan": rag.plan.model_copy(update={"inputs": inputs})})
    previous = review.model_copy(
        update={"services": [moved if s.name == "rag" else s for s in review.services]}
    )
    change = next(s.change for s in compare(review, previous).services if s.name == "rag")
    assert change is not None and (change.status, change.instances) == ("changed", 0)


@pytest.fixture(scope="module")
def next_quarter(reviews: Path) -> Path:
    """The bug hunt's next quarter against q4: batch-summaries (the only A100 service)
    retired, agent-tools added on H100, chat at 2 req/s per instance with growth 1.5."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["services"] = [s for s in spec["services"] if s["name"] != "batch-summaries"]
    spec["services"][0].update(limit="2rps", growth=1.5)
    spec["services"].append(
        {"name": "agent-tools", "profile": "preset:agent", "limit": "2rps", "gpu": "H100-80GB"}
    )
    (reviews / "next.yaml").write_text(yaml.safe_dump(spec))
    for out, lang in (("q1.pdf", "en"), ("q1-zh.pdf", "zh")):
        args = [str(reviews / "next.yaml"), "-o", str(reviews / out), "--lang", lang]
        result = CliRunner().invoke(app, ["review", *args, "--previous", str(reviews / "q4.json")])
        assert result.exit_code == 0, result.output
    return reviews


def _page_one(pdf: Path) -> str:
    """Page 1's text without any white space (a line may break anywhere in Chinese)."""
    text = subprocess.run(
        ["pdftotext", "-l", "1", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return "".join(text.split())


def test_page_one_names_services_added_and_retired_and_gpus_per_type(
    next_quarter: Path,
) -> None:
    """The totals (+2 instances, +2 GPUs) hid a retired service and three A100s given up for
    H100s: review.json listed them, neither PDF did (a bug hunt)."""
    review = json.loads((next_quarter / "q1.json").read_text())
    change = review["change"]
    assert change["removed_services"] == ["batch-summaries"]
    assert change["new_services"] == ["agent-tools"]
    assert change["gpus_by_type"]["A100-80GB"] == -3
    h100 = change["gpus_by_type"]["H100-80GB"]
    said = (
        f"new: agent-tools; retired: batch-summaries; GPUs by type: A100-80GB -3, "
        f"H100-80GB {h100:+d}."
    )
    assert review["sentence"].endswith(said)
    english = _page_one(next_quarter / "q1.pdf")
    assert "".join(said.split()) in english
    assert "ragunchanged" not in english and "unchanged" in english
    chinese = _page_one(next_quarter / "q1-zh.pdf")
    assert (
        f"新增服务：agent-tools；退役服务：batch-summaries；各类GPU变化：A100-80GB-3，H100-80GB{h100:+d}"
        in chinese
    )
    assert "不变" in chinese
    services = [s["name"] for s in review["services"]]  # names, not English sentences
    for name, english_check in (("q1", False), ("q1-zh", True)):
        problems = page_problems(next_quarter / f"{name}.pdf", english=english_check, data=services)
        assert not problems, "\n".join(problems[:20])


def test_the_shared_spares_rule_says_what_it_counts(next_quarter: Path) -> None:
    """The shared pool keeps the GPUs for load plus the k spares (x TP) of the service that
    keeps the most, not its N+k GPUs as the rule said (H100: 12 for load + 1 = 13)."""
    h100 = next(
        p
        for p in json.loads((next_quarter / "q1.json").read_text())["pools"]
        if p["gpu"] == "H100-80GB"
    )
    assert h100["gpus_shared_spares"] == h100["gpus_for_load"] + h100["spare_gpus_shared"]
    assert h100["spare_gpus_shared"] == 1
    assert "its k spare instances x TP GPUs, not its N+k" in h100["rule"]
    english = _page_one(next_quarter / "q1.pdf")
    assert "onlythesparesoftheservicethatkeepsthemost(itskspareinstancesxTPGPUs" in english
    chinese = _page_one(next_quarter / "q1-zh.pdf")
    assert "备用最多的那个服务的备用GPU（其k个备用实例xTP个GPU，而非其N+k个）" in chinese
    guide = " ".join((EXAMPLE.parents[1] / "docs" / "guides" / "review.md").read_text().split())
    assert "largest single service's N+k" not in guide
    assert "its k spare instances x TP GPUs, not its N+k" in guide


def test_a_review_named_like_its_previous_one_is_warned(reviews: Path) -> None:
    """A review is named after its PDF (the example has no `name:`): run again into another
    q4.pdf against q4.json, it is called q4 like its previous one and says so (the bug hunt
    ran the guide's two commands when the file named itself 2026-Q4 and got "since 2026-Q4"
    in a review called 2026-Q4), and the change reads +$0, not $+0."""
    (reviews / "again").mkdir(exist_ok=True)
    args = ["review", str(reviews / "review.yaml"), "-o", str(reviews / "again" / "q4.pdf")]
    result = CliRunner().invoke(app, [*args, "--previous", str(reviews / "q4.json")])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "is review 'q4', the same name as this one" in flat
    assert "since q4: +0 instances, +0 GPUs, +$0 per month." in flat
    other = CliRunner().invoke(app, [*args, "--previous", str(reviews / "q3.json")])
    assert other.exit_code == 0 and "warning" not in other.output


def test_pdfs_render_in_both_languages(reviews: Path, tmp_path: Path) -> None:
    pdftoppm = shutil.which("pdftoppm")
    assert pdftoppm, "pdftoppm (poppler-utils) is needed; scripts/test.sh installs it"
    for name in ("q4", "q4-zh"):
        subprocess.run(
            [pdftoppm, "-r", "30", "-png", str(reviews / f"{name}.pdf"), str(tmp_path / name)],
            check=True,
        )
        pngs = sorted(tmp_path.glob(f"{name}-*.png"))
        # page 1, per service a section + workload + plan pages, and the appendix
        assert len(pngs) >= 1 + 3 * 3 + 1
        for png in pngs:
            with Image.open(png) as image:
                lo, hi = image.convert("L").getextrema()
            assert lo < 128 < hi, f"{png.name} looks blank"
    text = subprocess.run(
        ["pdftotext", str(reviews / "q4-zh.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "季度容量评审" in text and "风险（跨服务排序）" in text


def test_review_strings_same_keys() -> None:
    assert REVIEW_STRINGS["en"].keys() == REVIEW_STRINGS["zh"].keys()


def test_every_page_reads_cleanly_in_both_languages(reviews: Path) -> None:
    """No text outside a page, over other text or cut by a shaded box's edge; no font left
    out; no English sentence in the Chinese review (testkit.pdf_check)."""
    for name, english in (("q4", False), ("q4-zh", True)):
        problems = page_problems(reviews / f"{name}.pdf", english=english)
        assert not problems, "\n".join(problems[:20])
    text = subprocess.run(
        ["pdftotext", str(reviews / "q4.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "batch-summ\n" not in text  # a cell breaks a name at its hyphen, not inside a word


def test_each_service_gets_its_alert_rules_and_dashboard(reviews: Path) -> None:
    """Every service with an SLO: rules promtool accepts, whose runbook re-runs the review,
    a PrometheusRule prometheus-operator's CRD accepts, and a dashboard, recorded in
    review.json's plan of that service."""
    from tests.helpers.k8s_schema import prometheus_rule_problems
    from tests.planner.ops.test_rules import promtool

    review = json.loads((reviews / "q4.json").read_text())
    with_slo = [s for s in review["services"] if s["plan"]["inputs"]["slo"]]
    assert with_slo
    for service in with_slo:
        ops = service["plan"]["ops"]
        assert Path(ops["rule_groups"]).parent == reviews / "q4-ops" / service["name"]
        checked = subprocess.run(
            [promtool(), "check", "rules", ops["rule_groups"]], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        rules = yaml.safe_load(Path(ops["rule_groups"]).read_text())["groups"][0]["rules"]
        assert all(
            f"Re-plan: capplan review {reviews / 'review.yaml'} -o {reviews / 'q4.pdf'}"
            in r["annotations"]["runbook"]
            for r in rules
        )
        rule = yaml.safe_load(Path(ops["prometheus_rule"]).read_text())
        assert prometheus_rule_problems(rule) == [], service["name"]
        assert json.loads(Path(ops["dashboard"]).read_text())["panels"]


def test_no_loose_ends_in_either_language(reviews: Path) -> None:
    """No nearly empty page (a service's short cross-checks page once stood alone), no
    heading at a page's foot, no path or input name broken inside a word, no "1 instances"
    (testkit.pdf_loose_ends)."""
    inputs = json.loads((reviews / "q4.json").read_text())["inputs"]
    names = [d["path"] for d in inputs] + [d["role"] for d in inputs]
    for name, lang in (("q4", "en"), ("q4-zh", "zh")):
        problems = loose_ends(reviews / f"{name}.pdf", lang=lang, paths=names)
        assert not problems, "\n".join(problems)


def test_a_service_s_skipped_log_rows_are_printed(tmp_path: Path) -> None:
    """A service read from logs with a bad row: the console names the row (file, line, what
    was expected), as `capplan profile` does, not only the PDF (a bug hunt); one service
    "needs", not "need"."""
    rows = "".join(f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.0,{100 + i},20\n" for i in range(120))
    log = tmp_path / "chat.csv"
    log.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows + "2023-11-16 18:02:00.0,abc,5\n"
    )
    spec = tmp_path / "review.yaml"
    spec.write_text(
        "services:\n  - name: chat\n    logs: [chat.csv]\n    limit: 2.5rps\n"
        '    slo: "ttft:p95<=2s"\n'
    )
    result = CliRunner().invoke(app, ["review", str(spec), "-o", str(tmp_path / "r.pdf")])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "chat: skipped 1 row(s) of its logs:" in flat
    assert "chat.csv:122: bad or missing input tokens (ContextTokens): expected a whole" in flat
    assert flat.count("1 service needs") == 1


def test_an_unconfirmed_limit_is_refused_naming_the_review_field_that_takes_it(
    tmp_path: Path,
) -> None:
    """The refusal said "plan with it anyway with --accept-unconfirmed", an option review has
    not (a bug hunt). It names the service's field `accept_unconfirmed: true`, which works."""
    from testkit.report_inputs import build_limit

    limit = build_limit().model_copy(update={"unconfirmed": "interrupted mid-level"})
    (tmp_path / "limit.json").write_text(limit.model_dump_json(by_alias=True))
    service = {"name": "chat", "profile": "preset:chat", "limit": "limit.json",
               "slo": limit.slo}  # fmt: skip
    for accept, code in ((False, 2), (True, 0)):
        spec = {"fleet_check": False, "services": [{**service, "accept_unconfirmed": accept}]}
        (tmp_path / "review.yaml").write_text(yaml.safe_dump(spec))
        result = CliRunner().invoke(
            app, ["review", str(tmp_path / "review.yaml"), "-o", str(tmp_path / f"{accept}.pdf")]
        )
        assert result.exit_code == code, result.output
        if not accept:
            said = " ".join(result.output.split())
            assert "review it anyway with `accept_unconfirmed: true` in the service" in said
            assert "--accept-unconfirmed" not in said
