"""The fleet check's router comparison in the PDF: which router the count assumes, what the
others would need, and the hit ratios against the profile's ideal one, in both languages."""

from __future__ import annotations

import re
from pathlib import Path

from pypdf import PdfReader

from contracts.plan import FleetCheck, FleetPoint, Plan, RouterCount
from reports import render_report
from testkit.report_inputs import write_fixture


def _fleet() -> FleetCheck:
    points = [
        FleetPoint(
            instances=n,
            routing=routing,
            attainment=1.0 if routing == "prefix_aware" or n > 4 else 0.9,
            meets_slo=routing == "prefix_aware" or n > 4,
            requests=3000,
            prefix_hit_ratio=0.85 if routing == "prefix_aware" else 0.48,
        )
        for n in (3, 4, 5)
        for routing in ("prefix_aware", "round_robin")
    ]
    return FleetCheck(
        simulated_s=300.0,
        rate_rps=12.5,
        points=points,
        verdict="n=4 meets the SLO under prefix_aware routing only",
        ideal_prefix_hit_ratio=0.898,
        routers=[
            RouterCount(
                routing="prefix_aware",
                min_instances_meeting=3,
                searched_up_to=5,
                prefix_hit_ratio=0.85,
                ideal_share=0.947,
            ),
            RouterCount(
                routing="round_robin",
                min_instances_meeting=None,
                searched_up_to=8,
                prefix_hit_ratio=0.48,
                ideal_share=0.535,
            ),
        ],
        assumed_routing="prefix_aware",
        prefix_threshold=0.3,
    )


def _text(tmp_path: Path, lang: str, fleet: FleetCheck | None) -> tuple[str, int]:
    paths = write_fixture(tmp_path / lang)
    plan = Plan.model_validate_json(paths.plan.read_text(encoding="utf-8"))
    plan = plan.model_copy(update={"checks": plan.checks.model_copy(update={"fleet": fleet})})
    paths.plan.write_text(plan.model_dump_json(by_alias=True, indent=2), encoding="utf-8")
    pdf = render_report(paths.profile, paths.run_dir, paths.plan, tmp_path / f"{lang}.pdf",
                        lang=lang)  # fmt: skip
    reader = PdfReader(pdf)
    text = " ".join(page.extract_text() for page in reader.pages)
    return re.sub(r"\s+", " ", text), plan.instances


def test_the_pdf_says_which_router_the_count_assumes_and_what_the_others_need(
    tmp_path: Path,
) -> None:
    text, n = _text(tmp_path, "en", _fleet())
    assert "Instances by router" in text
    assert f"The count of {n} assumes prefix-aware routing" in text
    assert "needs 3 instances to meet the SLO" in text
    assert "The other routers would need: round robin more than 8" in text
    assert "ideal of 89.8 %" in text and "at least 30 % of the prompt's blocks" in text
    assert "Share of ideal" in text and "95 %" in text and "54 %" in text


def test_the_chinese_pdf_names_the_routers_too(tmp_path: Path) -> None:
    text, n = _text(tmp_path, "zh", _fleet())
    packed = text.replace(" ", "")  # lines wrap inside Chinese words
    assert "各路由策略所需实例数" in packed
    assert f"{n}个实例的规划假定采用前缀感知路由" in packed
    assert "其他路由策略所需实例数:轮询多于8个" in packed


def test_a_plan_without_a_router_comparison_has_no_such_section(tmp_path: Path) -> None:
    fleet = _fleet().model_copy(update={"routers": [], "assumed_routing": None})
    text, _ = _text(tmp_path, "en", fleet)
    assert "Instances by router" not in text and "Fleet-simulation check" in text


def test_a_router_without_words_of_its_own_is_named_from_its_registry_name() -> None:
    """A router added in planner.fleet.routing alone (no `routing_NAME` string) still reads in
    both languages; one with words keeps them."""
    from reports.i18n.words import Words

    for lang in ("en", "zh"):
        assert Words(lang).router("toy_router") == "toy router"
    assert Words("en").router("round_robin") == "round robin"
    assert Words("zh").router("round_robin") == "轮询"
